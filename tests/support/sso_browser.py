"""A person's browser for single sign-on tests: real HTTP, cookies, forms (SPEC 19).

``SsoBrowser`` keeps cookies as a browser does (per host, path and expiry, through
http.cookiejar; ``Secure`` cookies go to loopback over plain HTTP, which browsers treat
as a secure context) and follows no redirect by itself: ``sign_in`` walks the whole
single sign-on as a person would, one request at a time, and records each step for
assertion messages::

    browser = SsoBrowser()
    result = browser.sign_in(gunicorn_url, email, oidc_provider)
    assert result.params['sso_auth_token'], result.steps
    browser.log_out_at_provider()  # the provider posts its back-channel logout tokens

Answers from ``base_url`` (Frontdesk) are checked against the OpenAPI document
(tests/contract.py) as ``servers.http`` does (``check_contract=False`` for a relying
party of a test's own); the provider's are not. Every request has a timeout.
"""

import dataclasses
import html.parser
import http.cookiejar
import json
import urllib.error
import urllib.parse
import urllib.request

from tests import contract
from tests.support.servers import Answer

TIMEOUT = 10
# A sign-in is about ten requests; a loop between two parties must end in a failure.
MAX_STEPS = 30
CALLBACK_PATH = '/omniauth/oidc/callback'
PASSWORD = 'a password the test provider does not check'
_LOOPBACK = {'127.0.0.1', 'localhost', '[::1]'}


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, req, fp, code, msg, headers, newurl):
        return None  # the 3xx becomes an HTTPError: an answer like any other


class _CookiePolicy(http.cookiejar.DefaultCookiePolicy):
    """Browsers treat loopback as a secure context: Secure cookies go there too."""

    def return_ok_secure(self, cookie, request):
        host = urllib.parse.urlsplit(request.get_full_url()).hostname
        return host in _LOOPBACK or super().return_ok_secure(cookie, request)


@dataclasses.dataclass
class Form:
    action: str
    method: str
    fields: dict
    buttons: list  # (name, value) of each submit button; name None when unnamed


class _Page(html.parser.HTMLParser):
    """The forms and links of an HTML page, as a person sees them."""

    def __init__(self):
        super().__init__()
        self.forms = []
        self.links = []

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if tag == 'form':
            self.forms.append(
                Form(
                    attrs.get('action', ''),
                    attrs.get('method', 'get').upper(),
                    {},
                    [],
                )
            )
        elif tag == 'a' and attrs.get('href'):
            self.links.append(attrs['href'])
        elif tag in ('input', 'button') and self.forms:
            kind = attrs.get('type', 'submit' if tag == 'button' else 'text')
            if kind == 'submit':
                self.forms[-1].buttons.append((attrs.get('name'), attrs.get('value')))
            elif attrs.get('name'):
                self.forms[-1].fields[attrs['name']] = attrs.get('value') or ''


def parse_page(body):
    page = _Page()
    page.feed(body.decode('utf-8', 'replace'))
    return page


@dataclasses.dataclass
class SsoResult:
    """Where a sign-in ended: the last redirect's Location, and every step."""

    location: str
    steps: list

    @property
    def params(self):
        """The query of the final Location (email, sso_auth_token, error)."""
        return dict(urllib.parse.parse_qsl(urllib.parse.urlsplit(self.location).query))


def _origin(url):
    parts = urllib.parse.urlsplit(url)
    return f'{parts.scheme}://{parts.netloc}'


class SsoBrowser:
    """One person's browser (cookies of every site it visited)."""

    def __init__(self, timeout=TIMEOUT, check_contract=True):
        self.timeout = timeout
        self.check_contract = check_contract
        self.cookies = http.cookiejar.CookieJar(_CookiePolicy())
        self._opener = urllib.request.build_opener(
            urllib.request.HTTPCookieProcessor(self.cookies), _NoRedirect()
        )
        self.provider = None
        self.base_origin = None
        self.steps = []

    def request(self, method, url, form=None, json_body=None, headers=None):
        """One request with this browser's cookies; every status is an answer."""
        headers = dict(headers or {})
        data = None
        if form is not None:
            data = urllib.parse.urlencode(form).encode()
            headers['Content-Type'] = 'application/x-www-form-urlencoded'
        elif json_body is not None:
            data = json.dumps(json_body).encode()
            headers['Content-Type'] = 'application/json'
        request = urllib.request.Request(url, data=data, headers=headers, method=method)
        try:
            with self._opener.open(request, timeout=self.timeout) as answer:
                result = Answer(answer.status, _lower(answer.headers), answer.read())
        except urllib.error.HTTPError as ex:
            result = Answer(ex.code, _lower(ex.headers), ex.read())
        step = f'{method} {url} -> {result.status}'
        if 'location' in result.headers:
            step += f' {result.headers["location"]}'
        self.steps.append(step)
        if self.check_contract and _origin(url) == self.base_origin:
            contract.check(
                method, url, headers, result.status, result.headers, result.body
            )
        return result

    def sign_in(
        self,
        base_url,
        email,
        provider,
        target='web',
        start='form',
        login=None,
        cancel=False,
    ):
        """Sign in at Frontdesk through ``provider``; return where it ended.

        Args:
            start: ``'form'`` posts the reference SSO page's form to
                /api/v1/auth/saml_login; ``'get'`` opens /auth/sso?email=&target=.
            login: the address the person types at the provider (``email``).
            cancel: press the provider's Cancel instead of signing in.
        """
        self.provider = provider
        self.base_origin = _origin(base_url)
        self.steps = []
        if start == 'form':
            url = base_url + '/api/v1/auth/saml_login'
            answer = self.request('POST', url, form={'email': email, 'target': target})
        elif start == 'get':
            query = urllib.parse.urlencode({'email': email, 'target': target})
            url = f'{base_url}/auth/sso?{query}'
            answer = self.request('GET', url)
        else:
            raise ValueError(f"start is 'form' or 'get', not {start!r}")
        typed = {'login': login or email, 'password': PASSWORD}
        at_provider = _origin(provider.issuer)
        while len(self.steps) < MAX_STEPS:
            if answer.status in (301, 302, 303, 307, 308):
                location = urllib.parse.urljoin(url, answer.headers['location'])
                ended = _origin(url) == self.base_origin and (
                    urllib.parse.urlsplit(url).path == CALLBACK_PATH
                )
                if ended or _origin(location) not in (at_provider, self.base_origin):
                    return SsoResult(location, self.steps)
                url, answer = location, self.request('GET', location)
            elif answer.status == 200 and _origin(url) == at_provider:
                url, answer = self._act_on_page(url, answer, typed, cancel)
            else:
                break
        raise AssertionError(
            f'the sign-in did not end in a redirect: {answer.status} '
            f'{answer.body[:500]!r}\nsteps:\n' + '\n'.join(self.steps)
        )

    def _act_on_page(self, url, answer, typed, cancel):
        """Do what a person does on the provider's page: fill its form, or cancel."""
        page = parse_page(answer.body)
        if not page.forms:
            raise AssertionError(
                f'no form on {url}: {answer.body[:500]!r}\nsteps:\n'
                + '\n'.join(self.steps)
            )
        if cancel:
            abort = next(link for link in page.links if link.endswith('/abort'))
            target = urllib.parse.urljoin(url, abort)
            return target, self.request('GET', target)
        form = page.forms[0]
        fields = {**form.fields, **{k: v for k, v in typed.items() if k in form.fields}}
        return self.submit(url, form, fields, 0 if form.buttons else None)

    def submit(self, url, form, fields, button=0):
        """Submit ``form`` of the page at ``url`` with ``fields``, pressing its
        ``button``-th submit button (None: none, as a script submits); return (the
        URL it went to, the answer)."""
        name, value = (None, None) if button is None else form.buttons[button]
        if name:
            fields = {**fields, name: value or ''}
        target = urllib.parse.urljoin(url, form.action or url)
        if form.method == 'POST':
            return target, self.request('POST', target, form=fields)
        target = target.split('?')[0] + '?' + urllib.parse.urlencode(fields)
        return target, self.request('GET', target)

    def log_out_at_provider(self, provider=None):
        """RP-initiated logout of this browser's provider session, confirmed on the
        provider's page: the provider then posts a logout_token to the back-channel
        logout URI of every client this session signed in to, and waits for their
        answers (2.5 s each at most) before it answers this request, the 303 returned
        here. ``provider``: the last ``sign_in``'s unless given."""
        provider = provider or self.provider
        url = provider.discovery['end_session_endpoint']
        answer = self.request('GET', url)
        assert answer.status == 200, (answer.status, answer.body[:500], self.steps)
        form = parse_page(answer.body).forms[0]
        # Without a session the provider's page is a form that submits itself, its
        # fields saying yes already; with one, the person presses "Yes, sign me out".
        yes = [i for i, (name, _) in enumerate(form.buttons) if name == 'logout']
        _, answer = self.submit(url, form, form.fields, yes[0] if yes else None)
        assert answer.status == 303, (answer.status, answer.body[:500], self.steps)
        return answer


def _lower(headers):
    return {name.lower(): value for name, value in headers.items()}
