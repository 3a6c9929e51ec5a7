"""A private PostgreSQL cluster for tests that stop and restart the server."""

import glob
import os
import pwd
import shutil
import subprocess
import tempfile


def pg_bindir():
    found = sorted(glob.glob('/usr/lib/postgresql/*/bin'), key=lambda path: int(path.split('/')[-2]))
    if not found:
        raise RuntimeError('no PostgreSQL server binaries; scripts/bootstrap installs them')
    return found[-1]


class PrivateCluster:
    """initdb + pg_ctl in a temporary directory, on a unix socket and a free TCP port.

    initdb and pg_ctl refuse to run as root, so as root they run as ``postgres``.
    """

    def __init__(self, port):
        self.port = port
        self.bindir = pg_bindir()
        self.root = tempfile.mkdtemp(prefix='frontdesk-pg-')
        os.chmod(self.root, 0o755)
        self.data = os.path.join(self.root, 'data')
        self.log = os.path.join(self.root, 'server.log')
        self._as = ['runuser', '-u', 'postgres', '--'] if os.geteuid() == 0 else []
        if self._as:
            owner = pwd.getpwnam('postgres')
            os.chown(self.root, owner.pw_uid, owner.pw_gid)
        self._run('initdb', '-D', self.data, '-U', 'postgres', '--auth=trust', '-E', 'UTF8')

    @property
    def url(self):
        return f'postgresql://postgres@127.0.0.1:{self.port}/postgres'

    def _run(self, tool, *args):
        subprocess.run([*self._as, os.path.join(self.bindir, tool), *args], check=True, capture_output=True,
                       timeout=120)

    def _ctl(self, action, *extra):
        options = f'-p {self.port} -k {self.root} -c listen_addresses=127.0.0.1'
        self._run('pg_ctl', '-D', self.data, '-l', self.log, '-o', options, '-w', *extra, action)

    def start(self):
        self._ctl('start')

    def stop(self):
        self._ctl('stop', '-m', 'fast')

    def restart(self):
        self._ctl('restart', '-m', 'fast')

    def destroy(self):
        try:
            self.stop()
        except subprocess.CalledProcessError:
            pass
        shutil.rmtree(self.root, ignore_errors=True)
