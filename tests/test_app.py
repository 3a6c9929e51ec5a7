"""create_app() builds: every query resolves, every schema compiles, the rules hold."""

import falcon
import pytest

import app as app_module
import db
from validators import load_validators


def test_every_migration_is_recorded_once_even_when_run_again(
    direct_database_url, conn
):
    assert db.migrate(direct_database_url) == []
    versions = [
        row['version'] for row in conn.execute('SELECT version FROM schema_migrations')
    ]
    assert versions == [path.stem for path in db.migration_files()]


def test_query_loader_rejects_duplicates_and_stray_text(tmp_path):
    (tmp_path / 'a.sql').write_text(
        '-- name: one\nSELECT 1;\n-- name: one\nSELECT 2;\n'
    )
    with pytest.raises(ValueError, match='duplicate'):
        db.load_queries(tmp_path)
    (tmp_path / 'a.sql').write_text('SELECT 0;\n-- name: one\nSELECT 1;\n')
    with pytest.raises(ValueError, match='before the first'):
        db.load_queries(tmp_path)


def test_every_schema_compiles():
    validators = load_validators()
    assert {'account_create', 'account_update', 'sign_in', 'definitions'} <= set(
        validators
    )


def test_a_responder_without_an_access_level_stops_the_boot():
    class Forgotten:
        access = {'GET': 'user'}

        def on_get(self, req, resp):
            pass

        def on_delete(self, req, resp):
            pass

    with pytest.raises(RuntimeError, match='on_delete has no access level'):
        app_module.check_access_declarations([('/x', Forgotten())])


def test_member_access_needs_an_account_in_the_route():
    class Misrouted:
        access = {'GET': 'member'}

        def on_get(self, req, resp):
            pass

    with pytest.raises(RuntimeError, match='needs an account_id'):
        app_module.check_access_declarations([('/x', Misrouted())])


def test_an_unknown_scope_stops_the_boot():
    class Misspelt:
        access = {'GET': 'user'}
        scopes = {'GET': 'profile:reed'}

        def on_get(self, req, resp):
            pass

    with pytest.raises(RuntimeError, match="unknown scope 'profile:reed'"):
        app_module.check_access_declarations([('/x', Misspelt())])


@pytest.mark.parametrize('level', ['public', 'session', 'enrolment'])
def test_a_scope_on_a_route_no_personal_token_may_use_stops_the_boot(level):
    class Contradiction:
        access = {'GET': level}
        scopes = {'GET': 'profile:read'}

        def on_get(self, req, resp):
            pass

    with pytest.raises(RuntimeError, match='not for personal access tokens'):
        app_module.check_access_declarations([('/x', Contradiction())])


def test_access_matrix_is_the_one_of_spec_3_2(config, pool, queries):
    declared = {
        template: dict(getattr(resource, 'access', {}))
        for template, resource in app_module.routes(
            pool, queries, config, load_validators()
        )
    }
    account = app_module.ACCOUNT
    assert declared[account] == {
        'GET': 'member',
        'PUT': 'administrator',
        'PATCH': 'administrator',
    }
    assert declared[account + '/cache_keys'] == {'GET': 'member'}
    assert declared[account + '/update_active_at'] == {'POST': 'member'}
    assert declared['/api/v1/accounts'] == {'POST': 'optional'}
    # Every profile endpoint is the caller's own; credential actions need a real sign-in
    # (SPEC 3.3), the rest also take api_access_token.
    assert declared['/api/v1/profile/reset_access_token'] == {'POST': 'session'}
    sessions = '/api/v1/profile/sessions'
    session_item = sessions + '/{session_id:id}'
    assert declared[sessions] == {'GET': 'session', 'DELETE': 'session'}
    assert declared[session_item] == {'DELETE': 'session'}
    # Members' security is not for integration credentials (SPEC 3.4).
    assert declared[account + '/audit_events'] == {'GET': 'administrator_session'}
    assert declared[account + '/agents/{user_id:id}/sessions'] == {
        'DELETE': 'administrator_session'
    }
    assert declared['/api/v1/profile/audit_events'] == {'GET': 'session'}
    # Everything stored about the caller (SPEC 20).
    assert declared['/api/v1/profile/export'] == {'GET': 'session'}
    # Deleting the account (SPEC 20) is account security too.
    assert declared[app_module.ENTERPRISE_ACCOUNT + '/toggle_deletion'] == {
        'POST': 'administrator_session'
    }
    # Erasing yourself (SPEC 20): a sign-in's session only; the rest of the profile
    # also takes api_access_token.
    assert declared['/api/v1/profile'] == {
        'GET': 'user',
        'PUT': 'user',
        'PATCH': 'user',
        'DELETE': 'session',
    }
    # Personal access tokens (SPEC 17) are account security too.
    tokens = '/api/v1/profile/access_tokens'
    token_item = tokens + '/{token_id:id}'
    assert declared[tokens] == {'GET': 'session', 'POST': 'session'}
    assert declared[token_item] == {'DELETE': 'session'}
    assert declared[account + '/access_tokens'] == {'GET': 'administrator_session'}
    assert declared[account + '/access_tokens/{token_id:id}'] == {
        'DELETE': 'administrator_session'
    }
    # MFA (SPEC 12): a real sign-in, or the setup token of an account's MFA requirement.
    mfa_routes = (
        '/api/v1/profile/mfa',
        '/api/v1/profile/mfa/verify',
        '/api/v1/profile/mfa/backup_codes',
    )
    for template in mfa_routes:
        assert set(declared[template].values()) == {'enrolment'}, template
    for template, access in declared.items():
        if template.startswith('/api/v1/profile') and template not in (
            '/api/v1/profile/reset_access_token',
            sessions,
            session_item,
            *mfa_routes,
            '/api/v1/profile/audit_events',
            '/api/v1/profile/export',
            '/api/v1/profile',
            tokens,
            token_item,
        ):
            assert set(access.values()) == {'user'}, template
    assert all(
        method in falcon.COMBINED_METHODS
        for access in declared.values()
        for method in access
    )
