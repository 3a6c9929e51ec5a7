"""Every route x method x scope set, for personal access tokens (SPEC 17).

Generated from the route table of app.py: for each method a route declares, and each
of the 15 non-empty sets of scopes, the answer a personal access token gets follows
from the declarations alone (``access`` and ``scopes``):

- ``public``: the token changes nothing (the same status as without credentials);
- no scope declared: 403 "This action needs a signed-in session" (fail closed: every
  security route, and any route nobody opened to such tokens);
- a scope declared and held (a write scope holds its read scope): the same status as
  the same request made with the user's session;
- a scope declared and not held: 403 insufficient_scope naming it.

A new route is covered by adding it to the table; one added without a scope is refused
(the last test proves it for a route the app does not have).
"""

import itertools
import re

import webtest

import app as app_module
from middleware.access import IMPLIED
from middleware.access import SCOPES
from tests.test_access_tokens import bearer
from tests.test_access_tokens import insufficient
from tests.test_access_tokens import NEEDS_SESSION
from tests.test_access_tokens import new_token
from validators import load_validators

SCOPE_SETS = [
    frozenset(combination)
    for size in range(1, len(SCOPES) + 1)
    for combination in itertools.combinations(SCOPES, size)
]
_FIELD = re.compile(r'\{(\w+)(?::(\w+)[^}]*)?\}')


def declared_routes(config, pool, queries):
    """(template, resource) as create_app() serves them (HEAD answered like GET)."""
    table = app_module.routes(pool, queries, config, load_validators())
    for _, resource in table:
        app_module.answer_head_like_get(resource)
    return table


def url_for(template, user):
    """A concrete path: the user's own account and id, 1 for other ids, 'x' else."""

    def value(match):
        name, converter = match.groups()
        if name == 'account_id':
            return str(user.account_id)
        if name == 'user_id':
            return str(user.id)
        return '1' if converter == 'id' else 'x'

    return _FIELD.sub(value, template)


def call(testapp, method, url, headers):
    """One request; methods that take a body send ``{}``."""
    body = (
        {'body': b'{}', 'content_type': 'application/json'}
        if method in ('POST', 'PUT', 'PATCH')
        else {}
    )
    return testapp.request(
        url, method=method, headers=headers, expect_errors=True, **body
    )


def effective(scopes):
    return scopes | {IMPLIED[scope] for scope in scopes if scope in IMPLIED}


def expectation(resource, method, scopes):
    """What a personal access token with ``scopes`` gets, from the declarations."""
    if resource.access[method] == 'public':
        return 'as_anonymous'
    scope = getattr(resource, 'scopes', {}).get(method)
    if scope is None:
        return 'needs_session'
    return 'as_session' if scope in effective(scopes) else insufficient(scope)


def test_every_route_method_and_scope_set(testapp, config, pool, queries, admin):
    table = declared_routes(config, pool, queries)
    tokens_by_scopes = {
        scopes: new_token(testapp, admin, scopes=sorted(scopes))
        for scopes in SCOPE_SETS
    }
    checked = 0
    for template, resource in table:
        url = url_for(template, admin)
        for method in resource.access:
            baseline = {}
            for scopes, token in tokens_by_scopes.items():
                expected = expectation(resource, method, scopes)
                where = (method, template, sorted(scopes))
                answer = call(testapp, method, url, bearer(token))
                if expected == 'needs_session':
                    assert answer.status_int == 403, where
                    if method != 'HEAD':
                        assert answer.json == NEEDS_SESSION, where
                elif isinstance(expected, dict):
                    assert answer.status_int == 403, where
                    if method != 'HEAD':
                        assert answer.json == expected, where
                else:
                    if expected not in baseline:
                        headers = admin.headers if expected == 'as_session' else {}
                        baseline[expected] = call(testapp, method, url, headers)
                    assert answer.status_int == baseline[expected].status_int, where
                checked += 1
    routes = sum(len(resource.access) for _, resource in table)
    assert checked == routes * len(SCOPE_SETS) and routes > 40


def test_a_route_without_a_scope_is_refused_to_personal_tokens(
    monkeypatch, config, pool, testapp, make_user
):
    """Fail closed: a route added without a scope declaration is the 403 for every
    token, whatever its scopes; the profile's access_token and sessions still reach
    it."""

    class BrandNew:
        access = {'GET': 'user', 'POST': 'user'}
        responses = {'GET': {200: 'empty'}, 'POST': {200: 'empty'}}

        def on_get(self, req, resp):
            resp.media = {}

        on_post = on_get

    routes = app_module.routes

    def with_a_new_route(*args):
        return [*routes(*args), ('/api/v1/profile/brand_new', BrandNew())]

    monkeypatch.setattr(app_module, 'routes', with_a_new_route)
    app = webtest.TestApp(app_module.create_app(config, pool))
    user = make_user()
    every_scope = new_token(testapp, user, scopes=list(SCOPES))
    for method in ('GET', 'HEAD', 'POST'):
        answer = call(app, method, '/api/v1/profile/brand_new', bearer(every_scope))
        assert answer.status_int == 403, method
        for headers in ({'api_access_token': user.access_token}, user.headers):
            assert call(
                app, method, '/api/v1/profile/brand_new', headers
            ).status_int == (200)
