"""The contract in the tools client teams reach for first.

Each tool runs as a client team would run it, on what the service publishes: the
document real gunicorn serves at /api/v1/openapi.json, and the files of schemas/.

- ajv, in strict mode, compiles every file of schemas/;
- Redocly's ``recommended`` rules find no error in the document;
- openapi-typescript's types and openapi-fetch compile a plain client script
  (tests/contract_tools/client.ts) under ``tsc --strict``, which then runs;
- openapi-python-client generates every operation with typed responses, and the
  generated client, as generated, signs up, confirms, signs in, reads and changes the
  profile and the account.

The npm tools are pinned in tests/contract_tools/package-lock.json (scripts/bootstrap
installs them), openapi-python-client in requirements-dev.txt.
"""

import importlib
import json
import os
import pathlib
import re
import shutil
import subprocess
import sys

import pytest

from tests import contract
from tests.support import CONTRACT_TOOLS
from tests.support import ROOT
from tests.support.servers import http
from tests.support.users import PASSWORD
from tests.support.users import unique_email
from tests.test_confirmations import queued_token

# Once, directly (tests/conftest.py): the subject is the document and the clients the
# tools make of it; what those clients send is what the sign-up, profile and account
# tests send, through PgBouncer too.
pytestmark = pytest.mark.direct_only
TOOLS = CONTRACT_TOOLS
BIN = TOOLS / 'node_modules' / '.bin'
# No update checks or usage reports from Redocly: the tests reach no network.
QUIET = {'REDOCLY_TELEMETRY': 'off', 'REDOCLY_SUPPRESS_UPDATE_NOTICE': 'true'}


def run(command, cwd=TOOLS, env=None, stdin=None, timeout=180):
    """A tool, with node_modules/.bin and the virtualenv's scripts on the PATH."""
    path = f'{BIN}:{pathlib.Path(sys.executable).parent}:{os.environ["PATH"]}'
    return subprocess.run(
        [str(part) for part in command],
        cwd=cwd,
        env={**os.environ, **QUIET, 'PATH': path, **(env or {})},
        input=stdin,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


@pytest.fixture(scope='module')
def published(gunicorn_url, tmp_path_factory):
    """The document as gunicorn serves it, in a file."""
    answer = http('GET', gunicorn_url + '/api/v1/openapi.json')
    assert answer.status == 200
    path = tmp_path_factory.mktemp('published') / 'openapi.json'
    path.write_bytes(answer.body)
    return path


def operations(document):
    return [
        (method, path)
        for path, methods in document['paths'].items()
        for method in methods
    ]


# --- ajv ------------------------------------------------------------------------------


def test_ajv_in_strict_mode_compiles_every_schema_file():
    result = run(['node', 'ajv_compile.mjs', ROOT / 'schemas'])
    assert result.returncode == 0, result.stdout + result.stderr
    compiled = set(re.findall(r'^compiled (\S+?\.json)$', result.stdout, re.M))
    assert compiled == {path.name for path in (ROOT / 'schemas').glob('*.json')}


def test_ajv_in_strict_mode_refuses_a_keyword_of_our_own(tmp_path):
    """What the files must not hold: a keyword only our server knows (the published
    files once had notBlank, maxBytes and format iana-timezone)."""
    for path in (ROOT / 'schemas').glob('*.json'):
        shutil.copy(path, tmp_path)
    schema = json.loads((tmp_path / 'account_update.json').read_text())
    schema['properties']['name']['notBlank'] = True
    (tmp_path / 'account_update.json').write_text(json.dumps(schema))
    result = run(['node', 'ajv_compile.mjs', tmp_path])
    assert result.returncode == 1
    assert 'FAILED account_update.json: strict mode: unknown keyword: "notBlank"' in (
        result.stdout
    )


# --- Redocly --------------------------------------------------------------------------


def test_redocly_recommended_finds_no_error(published):
    result = run(
        [
            BIN / 'redocly',
            'lint',
            published,
            '--config',
            'redocly.yaml',
            '--format',
            'json',
        ]
    )
    report = json.loads(result.stdout)
    errors = [
        f'{problem["ruleId"]}: {problem["message"]}'
        for problem in report['problems']
        if problem['severity'] == 'error'
    ]
    assert report['totals']['errors'] == 0, errors
    assert result.returncode == 0, result.stderr


# --- openapi-typescript and openapi-fetch ---------------------------------------------


@pytest.mark.long(20)
def test_a_typescript_client_compiles_under_strict_and_runs(
    published, gunicorn_url, admin, tmp_path
):
    code = '\n'.join(
        line.partition('//')[0]
        for line in (TOOLS / 'client.ts').read_text().splitlines()
    )
    # No casts, no non-null assertions: the generated types carry the client.
    assert not re.search(r'\bas\s+[A-Za-z{]|<[A-Z]\w*>\s*\w|!\.|!\)|!;', code)
    for name in ('client.ts', 'tsconfig.json'):
        shutil.copy(TOOLS / name, tmp_path)
    (tmp_path / 'package.json').write_text('{"type": "module"}')
    (tmp_path / 'node_modules').symlink_to(TOOLS / 'node_modules')
    generated = run(
        [BIN / 'openapi-typescript', published, '-o', tmp_path / 'schema.d.ts']
    )
    assert generated.returncode == 0, generated.stderr
    compiled = run([BIN / 'tsc', '-p', tmp_path], cwd=tmp_path)
    assert compiled.returncode == 0, compiled.stdout + compiled.stderr

    ran = run(
        ['node', 'build/client.js', gunicorn_url, admin.email, admin.password],
        cwd=tmp_path,
    )
    assert ran.returncode == 0, ran.stderr
    assert json.loads(ran.stdout) == {
        'display_name': 'Agent Smith (TS)',
        'theme': 'dark',
        'account': 'Acme',
        'unauthenticated': 'You need to sign in or sign up before continuing.',
    }


# --- openapi-python-client ------------------------------------------------------------


@pytest.fixture(scope='module')
def python_client(published, tmp_path_factory):
    """The package openapi-python-client generates from the document, imported."""
    where = tmp_path_factory.mktemp('python_client')
    result = run(
        [
            'openapi-python-client',
            'generate',
            '--path',
            published,
            '--meta',
            'none',
            '--output-path',
            where / 'frontdesk_api',
        ],
        cwd=where,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    sys.path.insert(0, str(where))
    try:
        yield (
            result.stdout,
            where / 'frontdesk_api',
            importlib.import_module('frontdesk_api'),
        )
    finally:
        sys.path.remove(str(where))


def test_the_python_client_generates_every_operation_with_typed_responses(
    python_client, published
):
    log, package, _ = python_client
    assert 'Warning' not in log and 'WARNING' not in log, log
    document = json.loads(published.read_text())
    modules = {
        path.stem
        for path in (package / 'api').glob('*/*.py')
        if path.stem != '__init__'
    }
    assert len(modules) == len(operations(document))
    for path in (package / 'api').glob('*/*.py'):
        source = path.read_text()
        # An untyped response is parsed as cast(Any, data): parsed carries no model.
        assert 'cast(Any, data)' not in source, path.name


def _checked():
    """httpx hooks that hold every answer of the generated client to the document."""

    def check(response):
        response.read()
        contract.check(
            response.request.method,
            str(response.request.url),
            dict(response.request.headers),
            response.status_code,
            dict(response.headers),
            response.content,
        )

    return {'event_hooks': {'response': [check]}}


def test_the_generated_python_client_drives_sign_up_to_the_account(
    python_client, gunicorn_url, conn
):
    _, _, api = python_client
    from frontdesk_api import models
    from frontdesk_api.api.profile import get_api_v1_profile
    from frontdesk_api.api.profile import put_api_v1_profile
    from frontdesk_api.api.sessions_and_confirmation import post_auth_confirmation
    from frontdesk_api.api.sessions_and_confirmation import post_auth_sign_in
    from frontdesk_api.api.sign_up_and_accounts import get_api_v1_accounts_account_id
    from frontdesk_api.api.sign_up_and_accounts import patch_api_v1_accounts_account_id
    from frontdesk_api.api.sign_up_and_accounts import post_api_v1_accounts

    def client_with(**headers):
        return api.Client(
            base_url=gunicorn_url,
            headers=headers,
            raise_on_unexpected_status=True,
            httpx_args=_checked(),
        )

    client = client_with()
    email = unique_email('generated')
    signed_up = post_api_v1_accounts.sync_detailed(
        client=client,
        body=models.AccountCreate(
            account_name='Generated',
            email=email,
            user_full_name='Ada Lovelace',
            password=PASSWORD,
        ),
    )
    assert signed_up.status_code == 200
    assert isinstance(signed_up.parsed, models.ResponseBodiesSignedIn)
    assert signed_up.parsed.data.email == email
    assert signed_up.parsed.data.confirmed is False

    confirmed = post_auth_confirmation.sync_detailed(
        client=client,
        body=models.ConfirmationCreate.from_dict(
            {'confirmation_token': queued_token(conn, email, 'confirmation_token')}
        ),
    )
    assert isinstance(confirmed.parsed, models.ResponseBodiesSignedIn)
    assert confirmed.parsed.data.confirmed is True

    signed_in = post_auth_sign_in.sync_detailed(
        client=client, body=models.SignIn(email=email, password=PASSWORD)
    )
    assert isinstance(signed_in.parsed, models.ResponseBodiesSignedIn)
    # The three headers of the sign-in are the credentials of every later request.
    session = client_with(
        **{name: signed_in.headers[name] for name in ('access-token', 'client', 'uid')}
    )

    user = get_api_v1_profile.sync(client=session)
    assert isinstance(user, models.ResponseUser)
    assert (user.email, user.name, user.role) == (
        email,
        'Ada Lovelace',
        models.ResponseUserRole.ADMINISTRATOR,
    )
    changed = put_api_v1_profile.sync(
        client=session,
        body=models.ProfileUpdate(
            profile=models.ProfileUpdateProfile(
                display_name='Ada L.',
                ui_settings=models.ProfileUpdateProfileUiSettingsType0.from_dict(
                    {'theme': 'dark'}
                ),
            )
        ),
    )
    assert isinstance(changed, models.ResponseUser)
    assert changed.display_name == 'Ada L.'
    assert changed.ui_settings.to_dict() == {'theme': 'dark'}

    account = get_api_v1_accounts_account_id.sync(
        account_id=user.account_id, client=session
    )
    assert isinstance(account, models.ResponseAccount)
    assert account.name == 'Generated'
    patched = patch_api_v1_accounts_account_id.sync(
        account_id=user.account_id,
        client=session,
        body=models.AccountUpdate(name='Generated Inc', timezone='Europe/Paris'),
    )
    assert isinstance(patched, models.ResponseAccount)
    assert patched.name == 'Generated Inc'
    assert patched.custom_attributes.to_dict()['timezone'] == 'Europe/Paris'

    # Refusals come back typed too.
    refused = get_api_v1_profile.sync_detailed(client=client)
    assert refused.status_code == 401
    assert isinstance(refused.parsed, models.ResponseErrorsUnauthenticated)
    invalid = patch_api_v1_accounts_account_id.sync_detailed(
        account_id=user.account_id,
        client=session,
        body=models.AccountUpdate(timezone='Mars/Olympus_Mons'),
    )
    assert invalid.status_code == 422
    assert isinstance(invalid.parsed, models.ResponseErrorsUnprocessable)
    assert invalid.parsed.attributes == ['timezone']


# --- docs/api.md, "The contract in your tools" ----------------------------------------


def _docs():
    return (ROOT / 'docs' / 'api.md').read_text()


def test_the_docs_show_the_scripts_the_suite_runs():
    docs = _docs()
    for name in ('client.ts', 'validate_leniently.mjs'):
        assert (TOOLS / name).read_text() in docs, name


def test_the_documented_python_example_runs(python_client, gunicorn_url, admin):
    _, package, _ = python_client
    section = _docs()[_docs().index('### A generated Python client') :]
    example = re.search(r'^```python\n(.*?)^```$', section, re.S | re.M)[1]
    result = run(
        [sys.executable, '-c', example],
        cwd=package.parent,
        env={'B': gunicorn_url, 'EMAIL': admin.email, 'PASSWORD': admin.password},
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout == 'Agent Smith (Python) Acme\n'


def test_answers_validate_leniently_as_the_docs_say(gunicorn_url, admin):
    """A field a later release adds passes; a field the schema requires is still
    checked; the files as published would refuse the new field."""
    user = http('GET', gunicorn_url + '/api/v1/profile', headers=admin.headers).json

    def validate(doc):
        return run(
            ['node', 'validate_leniently.mjs', ROOT / 'schemas', 'response_user.json'],
            stdin=json.dumps(doc),
        )

    assert validate({**user, 'added_later': 1}).stdout == 'valid\n'
    refused = validate({key: value for key, value in user.items() if key != 'email'})
    assert refused.returncode == 1 and "must have required property 'email'" in (
        refused.stdout
    )
    assert contract._validator('#/components/schemas/response_user').is_valid(
        user
    ) and not contract._validator('#/components/schemas/response_user').is_valid(
        {**user, 'added_later': 1}
    )
