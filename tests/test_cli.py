"""manage.py: migrate, create-user, touch-cache-key, disable-mfa, run as an operator
would."""

import json
import os
import subprocess
import sys
import threading

import psycopg

import db
from tests.support import ROOT
from tests.support.database import new_database
from tests.support.users import unique_email


def manage(env, *args):
    return subprocess.run(
        [sys.executable, 'manage.py', *args],
        cwd=ROOT,
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_two_concurrent_migrations_apply_everything_once():
    with new_database('frontdesk_migrate', migrate=False) as url:
        results = []
        threads = [
            threading.Thread(
                target=lambda: results.append(manage({'DATABASE_URL': url}, 'migrate'))
            )
            for _ in range(2)
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert [result.returncode for result in results] == [0, 0]
        outputs = sorted(result.stdout for result in results)
        assert outputs[0].startswith('applied 0 migration(s)')
        assert outputs[1].startswith(
            f'applied {len(db.migration_files())} migration(s)'
        )
        with psycopg.connect(url) as conn:
            assert conn.execute('SELECT count(*) FROM schema_migrations').fetchone()[
                0
            ] == len(db.migration_files())


def test_create_user_prints_the_user_and_an_agent_cannot_update_the_account(
    base_env, admin, testapp, conn
):
    email = unique_email('cli')
    done = manage(
        base_env,
        'create-user',
        '--email',
        email.upper(),
        '--name',
        'Cli Agent',
        '--password',
        'agent password',
        '--account-id',
        str(admin.account_id),
        '--role',
        'agent',
        '--confirmed',
    )
    assert done.returncode == 0, done.stderr
    user = json.loads(done.stdout)
    assert user['email'] == email and user['confirmed'] is True
    assert user['account_id'] == admin.account_id and user['role'] == 'agent'
    assert 'agent password' not in done.stdout + done.stderr
    signed_in = testapp.post_json(
        '/auth/sign_in', {'email': email, 'password': 'agent password'}, status=200
    )
    headers = {
        name: signed_in.headers[name] for name in ('access-token', 'client', 'uid')
    }
    resp = testapp.put_json(
        f'/api/v1/accounts/{admin.account_id}',
        {'name': 'Agent was here'},
        headers=headers,
        status=401,
    )
    assert resp.json == {'error': 'You are not authorized to do this action'}
    assert (
        conn.execute(
            'SELECT name FROM accounts WHERE id = %s', (admin.account_id,)
        ).fetchone()['name']
        == 'Acme'
    )


def test_create_user_refuses_bad_input_with_a_message(base_env, make_user):
    taken = make_user().email
    cases = [
        (
            ['--email', 'nope', '--name', 'N', '--password', 'password1'],
            'Email is invalid',
        ),
        (
            ['--email', unique_email(), '--name', 'N', '--password', 'short'],
            'Password is too short',
        ),
        (
            ['--email', taken, '--name', 'N', '--password', 'password1'],
            'Email has already been taken',
        ),
        (
            [
                '--email',
                unique_email(),
                '--name',
                'N',
                '--password',
                'password1',
                '--account-id',
                '999999999',
            ],
            'no account with id 999999999',
        ),
    ]
    for args, message in cases:
        done = manage(base_env, 'create-user', *args)
        assert done.returncode != 0
        assert message in done.stderr


def test_create_user_applies_only_the_length_rule_and_the_address_syntax(base_env):
    # SPEC 15: an operator's password is not checked against the common list or the
    # name.
    done = manage(
        base_env,
        'create-user',
        '--email',
        unique_email('ops'),
        '--name',
        'Password',
        '--password',
        'password1',
    )
    assert done.returncode == 0, done.stderr
    refused = manage(
        base_env,
        'create-user',
        '--email',
        'root,victim@example.com',
        '--name',
        'N',
        '--password',
        'a long password',
    )
    assert refused.returncode != 0 and 'Email is invalid' in refused.stderr


def test_touch_cache_key_sets_now(base_env, admin, testapp):
    done = manage(
        base_env, 'touch-cache-key', '--account-id', str(admin.account_id), 'inbox'
    )
    assert done.returncode == 0, done.stderr
    keys = testapp.get(
        f'/api/v1/accounts/{admin.account_id}/cache_keys', headers=admin.headers
    ).json['cache_keys']
    assert keys['label'] == keys['team'] == '0000000000'
    assert keys['inbox'].isdigit() and int(keys['inbox']) > 1_700_000_000
    assert json.loads(done.stdout) == keys
    missing = manage(base_env, 'touch-cache-key', '--account-id', '999999999', 'team')
    assert missing.returncode != 0 and 'no account' in missing.stderr


def test_disable_mfa_is_the_way_back_for_a_user_who_lost_every_factor(
    base_env, make_user, testapp, conn
):
    from tests.test_mfa import enable

    user = make_user()
    enable(testapp, user)
    testapp.post_json(
        '/auth/sign_in', {'email': user.email, 'password': user.password}, status=206
    )
    done = manage(base_env, 'disable-mfa', '--email', user.email.upper())
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == {
        'email': user.email,
        'mfa_enabled': False,
        'was_enabled': True,
    }
    # A credential change: every session ends, and sign-in needs no code any more.
    testapp.get('/api/v1/profile', headers=user.headers, status=401)
    assert (
        conn.execute(
            'SELECT count(*) AS n FROM mfa_recovery_codes WHERE user_id = %s',
            (user.id,),
        ).fetchone()['n']
        == 0
    )
    answer = testapp.post_json(
        '/auth/sign_in', {'email': user.email, 'password': user.password}, status=200
    )
    assert answer.json['data']['mfa_enabled'] is False
    missing = manage(base_env, 'disable-mfa', '--email', 'nobody-' + user.email)
    assert missing.returncode != 0 and 'no user' in missing.stderr
