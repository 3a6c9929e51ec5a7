"""/api/v1/profile: update (JSON and multipart), availability, auto_offline, active
account."""

import concurrent.futures
from http.client import HTTPConnection
import json
import urllib.parse

import pytest

from tests.support.servers import http
from tests.support.users import unique_email

UNAUTHENTICATED = {'errors': ['You need to sign in or sign up before continuing.']}
NOT_FOUND = {'error': 'Resource could not be found'}
NEW_PASSWORD = 'a brand new secret'


def blank(attribute='profile', text="Profile can't be blank"):
    return {'message': text, 'attributes': [attribute]}


@pytest.fixture
def agent(make_account, make_user):
    account_id = make_account()
    user = make_user(account_id=account_id, role='agent')
    user.account_id = account_id
    return user


def stored(conn, user_id):
    return conn.execute(
        'SELECT name, display_name, email, unconfirmed_email, encrypted_password, '
        'confirmed_at, custom_attributes, ui_settings, message_signature, avatar, '
        'access_token FROM users WHERE id = %s',
        (user_id,),
    ).fetchone()


def membership(conn, user_id, account_id):
    return conn.execute(
        'SELECT role, availability, auto_offline, active_at FROM account_users'
        ' WHERE user_id = %s AND account_id = %s',
        (user_id, account_id),
    ).fetchone()


def outbox_to(conn, address):
    return conn.execute(
        'SELECT kind, subject, text_body FROM mail_outbox WHERE to_address = %s',
        (address,),
    ).fetchall()


def sign_in(testapp, email, password, status=200):
    return testapp.post_json(
        '/auth/sign_in', {'email': email, 'password': password}, status=status
    )


def put(testapp, user, body, status=200, method='put'):
    send = getattr(testapp, f'{method}_json')
    return send('/api/v1/profile', body, headers=user.headers, status=status)


# --- who may call ---------------------------------------------------------------------


@pytest.mark.parametrize(
    'method, path',
    [
        ('GET', '/api/v1/profile'),
        ('PUT', '/api/v1/profile'),
        ('PATCH', '/api/v1/profile'),
        ('DELETE', '/api/v1/profile/avatar'),
        ('POST', '/api/v1/profile/availability'),
        ('POST', '/api/v1/profile/auto_offline'),
        ('PUT', '/api/v1/profile/set_active_account'),
    ],
)
def test_every_profile_endpoint_needs_credentials(testapp, method, path):
    answer = testapp.request(
        path,
        method=method,
        body=b'{"profile": {"name": "x"}}',
        content_type='application/json',
        expect_errors=True,
    )
    assert answer.status_int == 401
    assert answer.json == UNAUTHENTICATED


def test_get_returns_the_callers_user(testapp, agent):
    answer = testapp.get('/api/v1/profile', headers=agent.headers)
    assert answer.json['id'] == agent.id
    assert answer.json['email'] == agent.email
    assert answer.json['access_token'] == agent.access_token


# --- PUT / PATCH: plain fields --------------------------------------------------------


@pytest.mark.parametrize('method', ['put', 'patch'])
def test_update_changes_the_name_and_nothing_else(testapp, conn, agent, method):
    conn.execute("UPDATE users SET display_name = 'Smithy' WHERE id = %s", (agent.id,))
    before = stored(conn, agent.id)

    answer = put(testapp, agent, {'profile': {'name': 'Ada Lovelace'}}, method=method)

    assert answer.json['name'] == 'Ada Lovelace'
    assert answer.json['display_name'] == 'Smithy'
    after = stored(conn, agent.id)
    assert after['name'] == 'Ada Lovelace'
    assert {**before, 'name': 'Ada Lovelace'} == after
    # The caller's token headers come back, as on every token-authenticated success.
    assert answer.headers['access-token'] == agent.token
    assert answer.headers['uid'] == agent.email


def test_display_name_and_message_signature_come_back_as_sent(testapp, conn, agent):
    signature = 'Thanks\\nMy Signature\n<b>Ada</b> & ünïcødé 🚀'
    answer = put(
        testapp,
        agent,
        {'profile': {'display_name': 'Ada', 'message_signature': signature}},
    )

    assert answer.json['display_name'] == 'Ada'
    assert answer.json['available_name'] == 'Ada'
    assert answer.json['message_signature'] == signature
    assert stored(conn, agent.id)['message_signature'] == signature


def test_null_clears_display_name_and_message_signature(testapp, conn, agent):
    put(
        testapp, agent, {'profile': {'display_name': 'Ada', 'message_signature': 'Bye'}}
    )
    answer = put(
        testapp, agent, {'profile': {'display_name': None, 'message_signature': None}}
    )
    assert answer.json['display_name'] is None
    assert answer.json['message_signature'] is None
    row = stored(conn, agent.id)
    assert row['display_name'] is None and row['message_signature'] is None


def test_unknown_fields_are_ignored_and_never_applied(
    testapp, conn, agent, make_account
):
    other_account = make_account()
    before = stored(conn, agent.id)
    answer = put(
        testapp,
        agent,
        {
            'account_id': other_account,
            'role': 'administrator',
            'profile': {
                'name': 'Still Me',
                'account_id': other_account,
                'role': 'administrator',
                'confirmed_at': None,
                'uid': 'evil@example.com',
                'access_token': 'x' * 40,
                'encrypted_password': '$2b$04$' + 'a' * 53,
                'custom_attributes': {'evil': True},
                'avatar': 'evil.png',
                'unconfirmed_email': 'evil@example.com',
                'id': 1,
            },
        },
    )

    assert answer.json['name'] == 'Still Me'
    assert {**before, 'name': 'Still Me'} == stored(conn, agent.id)
    assert membership(conn, agent.id, agent.account_id)['role'] == 'agent'
    assert membership(conn, agent.id, other_account) is None


@pytest.mark.parametrize(
    'body, expected',
    [
        ({}, blank()),
        ({'profile': None}, blank()),
        ({'profile': {}}, blank()),
        ({'name': 'Top Level'}, blank()),
        ({'profile': 'Ada'}, blank(text='Profile must be an object')),
        (
            [{'profile': {'name': 'x'}}],
            {'message': 'Request body must be a JSON object'},
        ),
    ],
)
def test_a_missing_profile_is_a_422(testapp, conn, agent, body, expected):
    before = stored(conn, agent.id)
    answer = put(testapp, agent, body, status=422)
    assert answer.json == expected
    assert stored(conn, agent.id) == before


@pytest.mark.parametrize(
    'profile, attribute, text',
    [
        (
            {'name': 'test' * 999},
            'name',
            'Name is too long (maximum is 255 characters)',
        ),
        ({'name': '   '}, 'name', "Name can't be blank"),
        ({'name': None}, 'name', "Name can't be blank"),
        ({'name': 5}, 'name', 'Name must be a string'),
        (
            {'display_name': 'x' * 256},
            'display_name',
            'Display name is too long (maximum is 255 characters)',
        ),
        (
            {'message_signature': 'x' * 20001},
            'message_signature',
            'Message signature is too long (maximum is 20000 characters)',
        ),
        (
            {'message_signature': ['x']},
            'message_signature',
            'Message signature must be a string',
        ),
        ({'phone_number': 123}, 'phone_number', 'Phone number must be a string'),
        ({'ui_settings': ['dark']}, 'ui_settings', 'Ui settings must be an object'),
        ({'ui_settings': 'dark'}, 'ui_settings', 'Ui settings must be an object'),
        ({'email': 'not-an-address'}, 'email', 'Email is invalid'),
        ({'email': None}, 'email', "Email can't be blank"),
        (
            {'email': 'a' * 243 + '@example.com'},
            'email',
            'Email is too long (maximum is 254 characters)',
        ),
        ({'email': 'root,victim@example.com'}, 'email', 'Email is invalid'),
        ({'email': 'x<y>z@example.com'}, 'email', 'Email is invalid'),
    ],
)
def test_an_invalid_field_is_a_422_and_changes_nothing(
    testapp, conn, agent, profile, attribute, text
):
    before = stored(conn, agent.id)
    # A valid change sent alongside is not applied either.
    answer = put(
        testapp, agent, {'profile': {'display_name': 'Changed', **profile}}, status=422
    )
    assert answer.json == {'message': text, 'attributes': [attribute]}
    assert stored(conn, agent.id) == before


def test_every_failing_field_is_reported_at_once(testapp, agent):
    answer = put(
        testapp,
        agent,
        {'profile': {'name': 'x' * 256, 'message_signature': 'x' * 20001}},
        status=422,
    )
    assert answer.json == {
        'message': 'Name is too long (maximum is 255 characters), '
        'Message signature is too long (maximum is 20000 characters)',
        'attributes': ['name', 'message_signature'],
    }


def test_message_signature_of_20000_characters_is_accepted(testapp, conn, agent):
    answer = put(testapp, agent, {'profile': {'message_signature': 'é' * 20000}})
    assert answer.json['message_signature'] == 'é' * 20000


def test_a_non_json_body_is_refused(testapp, agent):
    answer = testapp.put(
        '/api/v1/profile',
        '{"profile": ',
        headers=agent.headers,
        content_type='application/json',
        status=400,
    )
    assert answer.json['message'].startswith('Malformed JSON')
    answer = testapp.put(
        '/api/v1/profile',
        'name=x',
        headers=agent.headers,
        content_type='text/plain',
        status=415,
    )
    assert answer.json == {
        'message': (
            'Content-Type must be application/json or application/x-www-form-urlencoded'
        )
    }


# --- custom attributes and ui_settings ------------------------------------------------


def test_phone_number_goes_into_custom_attributes_beside_other_keys(
    testapp, conn, agent
):
    conn.execute(
        """UPDATE users SET custom_attributes = '{"test": "test"}' WHERE id = %s""",
        (agent.id,),
    )

    answer = put(testapp, agent, {'profile': {'phone_number': '+123456789'}})

    assert answer.json['custom_attributes'] == {
        'test': 'test',
        'phone_number': '+123456789',
    }
    assert stored(conn, agent.id)['custom_attributes'] == {
        'test': 'test',
        'phone_number': '+123456789',
    }
    answer = put(testapp, agent, {'profile': {'phone_number': None}})
    assert stored(conn, agent.id)['custom_attributes'] == {'test': 'test'}


def test_ui_settings_are_merged_by_top_level_key(testapp, conn, agent):
    conn.execute(
        """UPDATE users SET ui_settings = '{"a": 1, "b": {"x": 1}, "keep": true}'"""
        ' WHERE id = %s',
        (agent.id,),
    )

    answer = put(
        testapp,
        agent,
        {'profile': {'ui_settings': {'a': None, 'b': {'y': 2}, 'c': [3]}}},
    )

    expected = {'b': {'y': 2}, 'c': [3], 'keep': True}
    assert answer.json['ui_settings'] == expected
    assert stored(conn, agent.id)['ui_settings'] == expected


def test_ui_settings_null_or_empty_changes_nothing(testapp, conn, agent):
    put(
        testapp, agent, {'profile': {'ui_settings': {'is_contact_sidebar_open': False}}}
    )
    for value in (None, {}):
        answer = put(testapp, agent, {'profile': {'ui_settings': value}})
        assert answer.json['ui_settings'] == {'is_contact_sidebar_open': False}


def test_concurrent_updates_of_different_ui_settings_keys_all_survive(
    gunicorn_url, conn, agent
):
    url = gunicorn_url + '/api/v1/profile'

    def update(key):
        return http(
            'PUT',
            url,
            {'profile': {'ui_settings': {key: key.upper()}}},
            headers=agent.headers,
        ).status

    for round_number in range(3):
        keys = [f'r{round_number}_k{index}' for index in range(8)]
        with concurrent.futures.ThreadPoolExecutor(max_workers=len(keys)) as pool:
            statuses = list(pool.map(update, keys))
        assert statuses == [200] * len(keys)
        settings = stored(conn, agent.id)['ui_settings']
        assert {key: key.upper() for key in keys}.items() <= settings.items()
    assert len(stored(conn, agent.id)['ui_settings']) == 24


# --- e-mail ---------------------------------------------------------------------------


def test_a_new_email_waits_for_confirmation(testapp, conn, agent):
    new = unique_email('new')

    answer = put(testapp, agent, {'profile': {'email': f'  {new.upper()} '}})

    assert answer.json['email'] == agent.email
    assert answer.json['uid'] == agent.email
    assert answer.json['unconfirmed_email'] == new
    row = stored(conn, agent.id)
    assert (row['email'], row['unconfirmed_email']) == (agent.email, new)
    mails = outbox_to(conn, new)
    assert [mail['kind'] for mail in mails] == ['confirmation']
    assert 'confirmation_token=' in mails[0]['text_body']
    token = conn.execute(
        'SELECT email FROM one_time_tokens WHERE user_id = %s'
        " AND purpose = 'confirmation'",
        (agent.id,),
    ).fetchone()
    assert token['email'] == new
    # The old address still signs the token headers until the new one is confirmed.
    testapp.get('/api/v1/profile', headers=agent.headers, status=200)


def test_sending_the_current_email_again_changes_and_sends_nothing(
    testapp, conn, agent
):
    pending = unique_email('pending')
    put(testapp, agent, {'profile': {'email': pending}})
    sent_before = conn.execute('SELECT count(*) AS n FROM mail_outbox').fetchone()['n']

    answer = put(testapp, agent, {'profile': {'email': agent.email.upper()}})

    assert answer.json['unconfirmed_email'] == pending
    assert stored(conn, agent.id)['unconfirmed_email'] == pending
    assert (
        conn.execute('SELECT count(*) AS n FROM mail_outbox').fetchone()['n']
        == sent_before
    )


def test_an_email_of_another_user_answers_as_a_free_one_and_mails_no_link(
    testapp, conn, agent, make_user
):
    other = make_user()
    free = unique_email('free')

    taken_answer = put(testapp, agent, {'profile': {'email': other.email.upper()}})
    assert taken_answer.json['unconfirmed_email'] == other.email
    assert stored(conn, agent.id)['email'] == agent.email
    # Only the owner's notice: no confirmation link that could never work anyway.
    assert [row['kind'] for row in outbox_to(conn, other.email)] == [
        'address_taken_notice'
    ]
    free_answer = put(testapp, agent, {'profile': {'email': free}})
    assert [row['kind'] for row in outbox_to(conn, free)] == ['confirmation']
    # The notice is its owner's mail (their erasure and their export find it by id),
    # the link the asker's.
    assert conn.execute(
        'SELECT to_address, user_id FROM mail_outbox WHERE to_address IN (%s, %s)'
        ' ORDER BY id',
        (other.email, free),
    ).fetchall() == [
        {'to_address': other.email, 'user_id': other.id},
        {'to_address': free, 'user_id': agent.id},
    ]

    def shape(answer):
        return (
            answer.status_int,
            sorted(answer.json),
            answer.json['unconfirmed_email'] is not None,
        )

    assert shape(taken_answer) == shape(free_answer)


# --- password -------------------------------------------------------------------------


def test_a_password_change_keeps_the_callers_token_and_revokes_the_others(
    testapp, conn, agent
):
    conn.execute("UPDATE users SET display_name = 'Smithy' WHERE id = %s", (agent.id,))
    other = sign_in(testapp, agent.email, agent.password).headers
    other_headers = {name: other[name] for name in ('access-token', 'client', 'uid')}

    answer = put(
        testapp,
        agent,
        {
            'profile': {
                'current_password': agent.password,
                'password': NEW_PASSWORD,
                'password_confirmation': NEW_PASSWORD,
            }
        },
    )

    assert answer.json['display_name'] == 'Smithy'
    assert answer.headers['access-token'] == agent.token
    assert stored(conn, agent.id)['display_name'] == 'Smithy'
    testapp.get('/api/v1/profile', headers=agent.headers, status=200)
    assert (
        testapp.get('/api/v1/profile', headers=other_headers, status=401).json
        == UNAUTHENTICATED
    )
    sign_in(testapp, agent.email, NEW_PASSWORD)
    sign_in(testapp, agent.email, agent.password, status=401)


def test_a_password_change_without_confirmation_is_allowed(testapp, agent):
    put(
        testapp,
        agent,
        {'profile': {'current_password': agent.password, 'password': NEW_PASSWORD}},
    )
    sign_in(testapp, agent.email, NEW_PASSWORD)


@pytest.mark.parametrize(
    'change',
    [
        {'current_password': 'correct horse 1', 'password': NEW_PASSWORD},
        {'email': 'elsewhere@example.com'},
        {'name': 'Renamed', 'email': 'elsewhere@example.com'},
    ],
)
def test_an_email_or_password_change_with_the_api_access_token_is_a_403(
    testapp, conn, agent, change
):
    before = stored(conn, agent.id)
    answer = testapp.put_json(
        '/api/v1/profile',
        {'profile': change},
        headers={'api_access_token': agent.access_token},
        status=403,
    )

    assert answer.json == {'error': 'This action needs a signed-in session'}
    assert stored(conn, agent.id) == before
    testapp.get('/api/v1/profile', headers=agent.headers, status=200)


def test_the_api_access_token_may_still_change_the_rest_and_resend_its_own_email(
    testapp, agent
):
    headers = {'api_access_token': agent.access_token}
    answer = testapp.put_json(
        '/api/v1/profile',
        {'profile': {'name': 'Renamed', 'email': agent.email.upper()}},
        headers=headers,
    )
    assert answer.json['name'] == 'Renamed' and 'access-token' not in answer.headers


@pytest.mark.parametrize('current', [None, '', 'wrong password', 12345678, 'x' * 100])
@pytest.mark.parametrize('password', [NEW_PASSWORD, 'short', 'x' * 73])
def test_a_wrong_current_password_is_refused_before_the_password_rules(
    testapp, conn, agent, current, password
):
    other = sign_in(testapp, agent.email, agent.password).headers
    before = stored(conn, agent.id)
    profile = {
        'name': 'Changed',
        'password': password,
        'password_confirmation': password,
    }
    if current is not None:
        profile['current_password'] = current

    answer = put(testapp, agent, {'profile': profile}, status=422)

    assert answer.json == {'message': 'Invalid current password'}
    assert stored(conn, agent.id) == before
    testapp.get(
        '/api/v1/profile',
        headers={name: other[name] for name in ('access-token', 'client', 'uid')},
    )


@pytest.mark.parametrize(
    'password, confirmation, attribute, text',
    [
        ('short', None, 'password', 'Password is too short (minimum is 8 characters)'),
        ('', None, 'password', "Password can't be blank"),
        ('é' * 37, None, 'password', 'Password is too long (maximum is 72 bytes)'),
        (12345678, None, 'password', 'Password must be a string'),
        (
            NEW_PASSWORD,
            NEW_PASSWORD + '!',
            'password_confirmation',
            "Password confirmation doesn't match Password",
        ),
    ],
)
def test_the_password_rules_apply_after_the_current_password(
    testapp, conn, agent, password, confirmation, attribute, text
):
    before = stored(conn, agent.id)
    profile = {'current_password': agent.password, 'password': password}
    if confirmation is not None:
        profile['password_confirmation'] = confirmation

    answer = put(testapp, agent, {'profile': profile}, status=422)

    assert answer.json == {'message': text, 'attributes': [attribute]}
    assert stored(conn, agent.id) == before


def test_a_72_byte_password_is_accepted(testapp, agent):
    password = 'é' * 36
    put(
        testapp,
        agent,
        {'profile': {'current_password': agent.password, 'password': password}},
    )
    sign_in(testapp, agent.email, password)


def test_a_null_password_is_no_password_change(testapp, conn, agent):
    before = stored(conn, agent.id)
    put(
        testapp,
        agent,
        {
            'profile': {
                'password': None,
                'password_confirmation': 'whatever',
                'name': 'N',
            }
        },
    )
    assert stored(conn, agent.id)['encrypted_password'] == before['encrypted_password']


# --- multipart ------------------------------------------------------------------------


def test_multipart_text_fields_update_the_profile(testapp, conn, agent):
    answer = testapp.put(
        '/api/v1/profile',
        params=[
            ('profile[name]', 'Multi Part'),
            ('profile[display_name]', ''),
            ('profile[phone_number]', '+44 20'),
            ('profile[message_signature]', 'Cheers,\r\nAda ✓'),
            ('profile[ui_settings]', '{"theme": "dark"}'),
            ('profile[role]', 'administrator'),
            ('other', 'ignored'),
        ],
        headers=agent.headers,
        content_type='multipart/form-data',
    )

    assert answer.json['name'] == 'Multi Part'
    row = stored(conn, agent.id)
    assert row['name'] == 'Multi Part'
    assert row['display_name'] == ''
    assert row['custom_attributes'] == {'phone_number': '+44 20'}
    assert row['message_signature'] == 'Cheers,\r\nAda ✓'
    assert row['ui_settings'] == {'theme': 'dark'}
    assert membership(conn, agent.id, agent.account_id)['role'] == 'agent'


def test_multipart_password_change_checks_the_current_password(testapp, conn, agent):
    before = stored(conn, agent.id)
    answer = testapp.put(
        '/api/v1/profile',
        params={
            'profile[password]': NEW_PASSWORD,
            'profile[current_password]': 'wrong password',
        },
        headers=agent.headers,
        content_type='multipart/form-data',
        status=422,
    )
    assert answer.json == {'message': 'Invalid current password'}
    assert stored(conn, agent.id) == before


def multipart(*parts, boundary='XyZzY'):
    body = b''.join(
        b'--%s\r\n%s\r\n\r\n%s\r\n' % (boundary.encode(), headers, data)
        for headers, data in parts
    )
    return (
        body + b'--%s--\r\n' % boundary.encode(),
        f'multipart/form-data; boundary={boundary}',
    )


def send_multipart(
    testapp, user, body, content_type, status, path='/api/v1/profile', method='PUT'
):
    # testapp.put() would re-encode a multipart body; request() sends these bytes as
    # they are.
    return testapp.request(
        path,
        method=method,
        body=body,
        content_type=content_type,
        headers=user.headers,
        status=status,
    )


def text_part(name, value):
    return b'Content-Disposition: form-data; name="%s"' % name.encode(), value


@pytest.mark.parametrize(
    'parts, message',
    [
        ([text_part('profile[ui_settings]', b'{"theme": ')], 'Malformed JSON'),
        (
            [text_part('profile[ui_settings]', b'{"a": "\\u0000"}')],
            'Malformed JSON: NUL',
        ),
        ([text_part('profile[name]', b'\xff\xfe')], 'profile[name] is not UTF-8 text'),
        (
            [text_part('profile[name]', b'A\x00B')],
            'profile[name] contains a NUL character',
        ),
        (
            [text_part(f'x{index}', b'1') for index in range(65)],
            'maximum number of form body parts exceeded',
        ),
    ],
)
def test_a_multipart_body_that_cannot_be_parsed_is_a_400(
    testapp, conn, agent, parts, message
):
    before = stored(conn, agent.id)
    body, content_type = multipart(*parts)
    answer = send_multipart(testapp, agent, body, content_type, 400)
    assert answer.json['message'].startswith(message)
    assert stored(conn, agent.id) == before


def test_a_truncated_multipart_body_is_a_400(testapp, agent):
    body, content_type = multipart(text_part('profile[name]', b'Ada'))
    answer = send_multipart(testapp, agent, body[:30], content_type, 400)
    assert set(answer.json) == {'message'}


def test_a_multipart_body_without_a_boundary_is_a_400(testapp, agent):
    answer = send_multipart(testapp, agent, b'--x\r\n', 'multipart/form-data', 400)
    assert set(answer.json) == {'message'}


def test_multipart_is_only_for_the_profile_update(testapp, agent):
    body, content_type = multipart(text_part('profile[availability]', b'busy'))
    answer = send_multipart(
        testapp,
        agent,
        body,
        content_type,
        415,
        path='/api/v1/profile/availability',
        method='POST',
    )
    assert answer.json == {
        'message': (
            'Content-Type must be application/json or application/x-www-form-urlencoded'
        )
    }


# --- availability, auto_offline, set_active_account -----------------------------------


def entry(answer, account_id):
    return next(item for item in answer.json['accounts'] if item['id'] == account_id)


def test_availability_is_stored_for_that_membership(testapp, conn, agent):
    answer = testapp.post_json(
        '/api/v1/profile/availability',
        {'profile': {'availability': 'busy', 'account_id': agent.account_id}},
        headers=agent.headers,
    )
    assert entry(answer, agent.account_id)['availability'] == 'busy'
    assert membership(conn, agent.id, agent.account_id)['availability'] == 'busy'


@pytest.mark.parametrize(
    'profile, expected',
    [
        (
            {'availability': 'away'},
            blank('availability', 'Availability is not included in the list'),
        ),
        ({'availability': None}, blank('availability', "Availability can't be blank")),
        (
            {'availability': 'busy', 'account_id': '1'},
            blank('account_id', 'Account id must be an integer'),
        ),
        (
            {'availability': 'busy', 'account_id': None},
            blank('account_id', "Account id can't be blank"),
        ),
        (
            {'account_id': None, 'availability': None},
            {
                'message': "Availability can't be blank, Account id can't be blank",
                'attributes': ['availability', 'account_id'],
            },
        ),
    ],
)
def test_availability_errors(testapp, conn, agent, profile, expected):
    body = {'profile': {'account_id': agent.account_id, **profile}}
    answer = testapp.post_json(
        '/api/v1/profile/availability', body, headers=agent.headers, status=422
    )
    assert answer.json == expected
    assert membership(conn, agent.id, agent.account_id)['availability'] == 'online'


@pytest.mark.parametrize('path', ['availability', 'auto_offline', 'set_active_account'])
@pytest.mark.parametrize('body', [{}, {'profile': None}, {'account_id': 1}])
def test_a_missing_profile_is_a_422_for_account_settings_too(
    testapp, agent, path, body
):
    method = testapp.put_json if path == 'set_active_account' else testapp.post_json
    answer = method(f'/api/v1/profile/{path}', body, headers=agent.headers, status=422)
    assert answer.json == blank()


def test_auto_offline_is_stored_for_that_membership(testapp, conn, agent):
    answer = testapp.post_json(
        '/api/v1/profile/auto_offline',
        {'profile': {'auto_offline': False, 'account_id': agent.account_id}},
        headers=agent.headers,
    )
    assert answer.json['accounts'][0]['auto_offline'] is False
    assert membership(conn, agent.id, agent.account_id)['auto_offline'] is False
    testapp.post_json(
        '/api/v1/profile/auto_offline',
        {'profile': {'auto_offline': True, 'account_id': agent.account_id}},
        headers=agent.headers,
    )
    assert membership(conn, agent.id, agent.account_id)['auto_offline'] is True


@pytest.mark.parametrize(
    'profile',
    [{}, {'auto_offline': None}, {'auto_offline': 'false'}, {'auto_offline': 0}],
)
def test_auto_offline_must_be_a_boolean(testapp, conn, agent, profile):
    answer = testapp.post_json(
        '/api/v1/profile/auto_offline',
        {'profile': {'account_id': agent.account_id, **profile}},
        headers=agent.headers,
        status=422,
    )
    assert answer.json == blank('auto_offline', 'Auto offline must be true or false')
    assert membership(conn, agent.id, agent.account_id)['auto_offline'] is True


def test_set_active_account_makes_it_the_users_account(
    testapp, conn, agent, make_account, make_user
):
    second = make_account('Second')
    conn.execute(
        'INSERT INTO account_users (account_id, user_id, role)'
        " VALUES (%s, %s, 'agent')",
        (second, agent.id),
    )
    testapp.post_json(
        f'/api/v1/accounts/{agent.account_id}/update_active_at',
        {},
        headers=agent.headers,
    )

    answer = testapp.put_json(
        '/api/v1/profile/set_active_account',
        {'profile': {'account_id': second}},
        headers=agent.headers,
    )

    assert answer.json == {}
    assert membership(conn, agent.id, second)['active_at'] is not None
    assert (
        testapp.get('/api/v1/profile', headers=agent.headers).json['account_id']
        == second
    )


@pytest.mark.parametrize(
    'path, profile',
    [
        ('/api/v1/profile/availability', {'availability': 'busy'}),
        ('/api/v1/profile/auto_offline', {'auto_offline': False}),
        ('/api/v1/profile/set_active_account', {}),
    ],
)
def test_another_accounts_id_is_a_404_and_changes_nothing(
    testapp, conn, agent, admin, path, profile
):
    method = (
        testapp.put_json if path.endswith('set_active_account') else testapp.post_json
    )
    for account_id in (admin.account_id, 2**63 - 1):
        answer = method(
            path,
            {'profile': {**profile, 'account_id': account_id}},
            headers=agent.headers,
            status=404,
        )
        assert answer.json == NOT_FOUND
    assert membership(conn, admin.id, admin.account_id) == {
        'role': 'administrator',
        'availability': 'online',
        'auto_offline': True,
        'active_at': None,
    }


@pytest.mark.parametrize(
    'path, profile',
    [
        ('/api/v1/profile/availability', {'availability': 'busy'}),
        ('/api/v1/profile/auto_offline', {'auto_offline': False}),
        ('/api/v1/profile/set_active_account', {}),
    ],
)
@pytest.mark.parametrize('account_id', ['1', 1.5, True, [1], {'id': 1}])
def test_an_account_id_of_the_wrong_type_is_a_422(
    testapp, agent, path, profile, account_id
):
    method = (
        testapp.put_json if path.endswith('set_active_account') else testapp.post_json
    )
    answer = method(
        path,
        {'profile': {**profile, 'account_id': account_id}},
        headers=agent.headers,
        status=422,
    )
    assert answer.json == blank('account_id', 'Account id must be an integer')


def test_a_chunked_multipart_body_without_content_length_is_a_400(gunicorn_url, agent):
    body, content_type = multipart(text_part('profile[name]', b'Chunked'))
    connection = HTTPConnection(urllib.parse.urlsplit(gunicorn_url).netloc, timeout=10)
    try:
        connection.request(
            'PUT',
            '/api/v1/profile',
            body=iter([body]),
            encode_chunked=True,
            headers={**agent.headers, 'Content-Type': content_type},
        )
        answer = connection.getresponse()
        assert answer.status == 400
        assert json.loads(answer.read()) == {
            'message': 'A multipart body needs a Content-Length header'
        }
    finally:
        connection.close()


def test_an_integral_float_account_id_is_that_account(testapp, conn, agent):
    testapp.post_json(
        '/api/v1/profile/availability',
        {'profile': {'availability': 'offline', 'account_id': float(agent.account_id)}},
        headers=agent.headers,
    )
    assert membership(conn, agent.id, agent.account_id)['availability'] == 'offline'


def test_an_address_outside_ascii_is_invalid(testapp, conn, agent):
    # It would come back in the uid header, which cannot carry it.
    before = stored(conn, agent.id)
    resp = put(testapp, agent, {'profile': {'email': 'zoë@example.com'}}, status=422)
    assert resp.json == {'message': 'Email is invalid', 'attributes': ['email']}
    assert stored(conn, agent.id) == before


# --- the ui_settings cap ------------------------------------------------------------

UI_SETTINGS_TOO_LARGE = {
    'message': 'Ui settings is too large',
    'attributes': ['ui_settings'],
}


def test_ui_settings_over_64_kib_are_refused_and_nothing_changes(testapp, conn, agent):
    answer = put(
        testapp,
        agent,
        {'profile': {'name': 'Not Applied', 'ui_settings': {'big': 'x' * 65536}}},
        status=422,
    )
    assert answer.json == UI_SETTINGS_TOO_LARGE
    row = stored(conn, agent.id)
    assert row['name'] != 'Not Applied' and row['ui_settings'] == {}


def test_ui_settings_cannot_grow_past_64_kib_by_merging(testapp, conn, agent):
    for index in range(3):
        put(testapp, agent, {'profile': {'ui_settings': {f'k{index}': 'x' * 20000}}})
    answer = put(
        testapp, agent, {'profile': {'ui_settings': {'k3': 'x' * 20000}}}, status=422
    )
    assert answer.json == UI_SETTINGS_TOO_LARGE
    assert sorted(stored(conn, agent.id)['ui_settings']) == ['k0', 'k1', 'k2']
    # Replacing or removing keys still works at the cap.
    put(testapp, agent, {'profile': {'ui_settings': {'k0': None, 'k3': 'small'}}})
    assert sorted(stored(conn, agent.id)['ui_settings']) == ['k1', 'k2', 'k3']


def test_concurrent_ui_settings_updates_cannot_pass_the_cap_together(
    gunicorn_url, conn, agent
):
    url = gunicorn_url + '/api/v1/profile'

    def update(key):
        return http(
            'PUT',
            url,
            {'profile': {'ui_settings': {key: 'y' * 20000}}},
            headers=agent.headers,
        ).status

    keys = [f'c{index}' for index in range(8)]
    with concurrent.futures.ThreadPoolExecutor(len(keys)) as pool:
        statuses = list(pool.map(update, keys))
    settings = stored(conn, agent.id)['ui_settings']
    assert sorted(statuses) == [200] * 3 + [422] * 5
    assert len(settings) == 3 and len(json.dumps(settings)) <= 65536
