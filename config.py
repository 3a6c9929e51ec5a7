"""Settings read once from the environment and checked at start."""

import base64
import binascii
import dataclasses
import ipaddress
import os
import pathlib
import re
import sys
import urllib.parse

# The service's release, as GET /api and the OpenAPI document report it.
VERSION = '1.1.0'
SIGNUP_MODES = ('true', 'false', 'api_only')
BREACHED_CHECKS = ('off', 'hibp')
SMTP_TLS_MODES = ('starttls', 'implicit', 'off')
NO_IDLE_TIMEOUT_SECONDS = 100 * 365 * 86400
# Where scripts/run's embedded database and development mail live.
ROOT = pathlib.Path(__file__).resolve().parent
EMBEDDED_DATABASE_URL_FILE = ROOT / 'var' / 'run' / 'database_url'
# The embedded database's migration role (SPEC 3.4), for migrate and prune.
EMBEDDED_MIGRATE_DATABASE_URL_FILE = ROOT / 'var' / 'run' / 'migrate_database_url'
MAIL_DELIVERIES = ('smtp', 'file')
LOG_FORMATS = ('text', 'json')


@dataclasses.dataclass(frozen=True)
class Config:
    database_url: str
    enable_account_signup: str = 'true'
    hcaptcha_secret: str | None = None
    hcaptcha_verify_url: str = 'https://api.hcaptcha.com/siteverify'
    frontend_url: str = 'http://localhost:3000'
    mail_from: str = 'Frontdesk <accounts@localhost>'
    smtp_host: str = 'localhost'
    smtp_port: int = 25
    smtp_username: str | None = None
    smtp_password: str | None = dataclasses.field(default=None, repr=False)
    avatar_dir: str = './var/avatars'
    avatar_url_prefix: str = '/avatars/'
    # 8 MiB, not 15: decoding a JPEG costs about 13 ms of CPU per MiB
    # whatever its pixels (docs/performance.md, "Avatars").
    avatar_max_bytes: int = 8 * 1024 * 1024
    token_lifespan_days: int = 60
    bcrypt_rounds: int = 12
    rate_limits: bool = True
    # ipaddress networks; '*' is 0.0.0.0/0 and ::/0 (see _networks).
    forwarded_allow_ips: tuple = (
        ipaddress.ip_network('127.0.0.1'),
        ipaddress.ip_network('::1'),
    )
    pool_max_size: int = 2
    pool_timeout: float = 5.0
    # SPEC 11: exact origins allowed cross-origin; empty means CORS is off.
    cors_allowed_origins: tuple = ()
    # SPEC 15: the optional k-anonymity breached-password lookup.
    breached_password_check: str = 'off'
    hibp_range_url: str = 'https://api.pwnedpasswords.com/range'
    # How SMTP is secured, 'starttls', 'implicit' (SMTP over TLS) or 'off';
    # the login (SMTP_USERNAME) goes out only over TLS.
    smtp_tls: str = 'off'
    # Sessions (SPEC 13) and the audit log (SPEC 14).
    max_user_sessions: int = 25
    session_idle_timeout_minutes: int | None = None
    audit_retention_days: int = 365
    # SPEC 3.4: how recent a session's last password or second-factor check
    # must be for an e-mail change (and personal access tokens) without the current
    # password.
    reauth_window_minutes: int = 15
    # --- SPEC 16: behind a transaction-mode pooler (PgBouncer) ---
    # Off: psycopg never prepares statements (prepare_threshold=None), which such a
    # pooler cannot carry from one transaction to the next.
    prepared_statements: bool = True
    # manage.py migrate: a direct connection, for its session-level advisory lock.
    migrate_database_url: str | None = dataclasses.field(default=None, repr=False)
    # Development mail into files, and the log line format.
    mail_delivery: str = 'smtp'
    mail_dir: str = str(ROOT / 'var' / 'mail')
    log_format: str = 'text'
    # MFA (SPEC 12): key material for the TOTP secrets; None turns the feature off.
    secret_key: bytes | None = dataclasses.field(default=None, repr=False)
    # SPEC 19: an issuer (and every URL its discovery names) may be on a loopback or
    # private address, over http too: tests, providers on the same private network.
    oidc_allow_private_issuers: bool = False
    # SPEC 20: how long a scheduled account deletion waits, and who hears of each purge.
    account_deletion_grace_days: int = 7
    instance_admin_email: str | None = None

    @property
    def idle_seconds(self):
        """The idle timeout in seconds; a century when it is off (one query plan either
        way).
        """
        if self.session_idle_timeout_minutes is None:
            return NO_IDLE_TIMEOUT_SECONDS
        return self.session_idle_timeout_minutes * 60

    @property
    def signup_enabled(self):
        return self.enable_account_signup != 'false'


class ConfigError(Exception):
    """One invalid variable; the message names it."""


def _number(env, name, default, low, high, kind=int):
    raw = env.get(name)
    if raw is None or raw == '':
        return default
    try:
        value = kind(raw)
    except ValueError:
        what = 'an integer' if kind is int else 'a number'
        raise ConfigError(f'{name} must be {what}, got {raw!r}') from None
    if not low <= value <= high:
        raise ConfigError(f'{name} must be between {low} and {high}, got {value}')
    return value


def _bool(env, name, default, true='true', false='false'):
    raw = env.get(name)
    if raw is None or raw == '':
        return default
    if raw.lower() == true:
        return True
    if raw.lower() == false:
        return False
    raise ConfigError(f'{name} must be {true} or {false}, got {raw!r}')


def _url(env, name, default):
    value = env.get(name) or default
    parts = urllib.parse.urlsplit(value)
    if parts.scheme not in ('http', 'https') or not parts.netloc:
        raise ConfigError(f'{name} must be an http(s) URL, got {value!r}')
    return value.rstrip('/')


def _origins(env, name):
    """Exact origins (``https://host[:port]``), comma-separated; ``*`` is refused."""
    origins = tuple(
        origin.strip().rstrip('/')
        for origin in (env.get(name) or '').split(',')
        if origin.strip()
    )
    for origin in origins:
        parts = urllib.parse.urlsplit(origin)
        if (
            parts.scheme not in ('http', 'https')
            or not parts.netloc
            or parts.path
            or parts.query
        ):
            raise ConfigError(
                f'{name} must list origins like https://dashboard.example.com, got '
                f'{origin!r}'
            )
    return origins


def _networks(env, name, default):
    """Addresses and CIDR networks, comma-separated; ``*`` is every address.

    Parsed as gunicorn parses its forwarded_allow_ips (strict: ``10.0.0.1/8``, with
    host bits set, is a mistake), so the app and gunicorn trust the same peers.
    """
    raw = env.get(name) or default
    networks = []
    for item in (part.strip() for part in raw.split(',')):
        if item == '*':
            networks += [
                ipaddress.ip_network('0.0.0.0/0'),
                ipaddress.ip_network('::/0'),
            ]
        elif item:
            try:
                networks.append(ipaddress.ip_network(item))
            except ValueError:
                raise ConfigError(
                    f'{name} must list IP addresses, CIDR networks or *, got {item!r}'
                ) from None
    return tuple(networks)


def _smtp_tls(env):
    """SMTP_TLS, or the older SMTP_STARTTLS=true read as starttls."""
    legacy = _bool(env, 'SMTP_STARTTLS', None)
    mode = (env.get('SMTP_TLS') or '').lower()
    if not mode:
        mode = 'starttls' if legacy else 'off'
    elif mode not in SMTP_TLS_MODES:
        raise ConfigError(
            f'SMTP_TLS must be one of {", ".join(SMTP_TLS_MODES)}, got '
            f'{env["SMTP_TLS"]!r}'
        )
    elif legacy is not None and legacy != (mode == 'starttls'):
        raise ConfigError(
            f'SMTP_STARTTLS={env["SMTP_STARTTLS"]} contradicts SMTP_TLS={mode}; '
            'unset SMTP_STARTTLS'
        )
    if env.get('SMTP_USERNAME') and mode == 'off':
        raise ConfigError(
            'SMTP_USERNAME is set but SMTP_TLS is off: the login would go out '
            'unencrypted (set SMTP_TLS=starttls or implicit)'
        )
    return mode


def _address(env, name):
    value = env.get(name)
    if not value:
        return None
    # The base layer may not import services/addresses.py: the shape, and the stored
    # form (lower case) that addresses.normalise gives.
    value = value.strip().lower()
    if not re.fullmatch(r'[^@\s]+@[^@\s]+\.[^@\s]+', value) or len(value) > 254:
        raise ConfigError(f'{name} must be an e-mail address, got {value!r}')
    return value


def _choice(env, name, choices):
    value = env.get(name) or choices[0]
    if value not in choices:
        raise ConfigError(f'{name} must be one of {", ".join(choices)}, got {value!r}')
    return value


def embedded_database_url(path=EMBEDDED_DATABASE_URL_FILE):
    """A URL scripts/run wrote for its embedded database, or None: the application
    role's, or with EMBEDDED_MIGRATE_DATABASE_URL_FILE the migration role's."""
    try:
        return path.read_text().strip() or None
    except OSError:
        return None


def mail_dir(env):
    return env.get('MAIL_DIR') or str(ROOT / 'var' / 'mail')


def _secret_key(env):
    """SECRET_KEY: unset is None (MFA off); set, at least 32 bytes of base64."""
    raw = (env.get('SECRET_KEY') or '').strip()
    if not raw:
        return None
    try:
        key = base64.b64decode(
            raw.replace('-', '+').replace('_', '/') + '=' * (-len(raw) % 4),
            validate=True,
        )
    except (binascii.Error, ValueError):
        raise ConfigError(
            'SECRET_KEY must be base64 (e.g. the output of `openssl rand -base64 32`)'
        ) from None
    if len(key) < 32:
        raise ConfigError(
            f'SECRET_KEY must decode to at least 32 bytes, got {len(key)} '
            '(make one with `openssl rand -base64 32`)'
        )
    return key


def load(env=None):
    """Build the Config from ``env`` (default: os.environ) or raise ConfigError.

    Without DATABASE_URL in os.environ, the embedded database of scripts/run is used
    when there is one, so operator commands need no setup (SPEC 10), with its migration
    role as MIGRATE_DATABASE_URL.
    """
    from_os = env is None
    env = os.environ if env is None else env
    embedded = from_os and not env.get('DATABASE_URL')
    database_url = env.get('DATABASE_URL') or (
        embedded_database_url() if embedded else None
    )
    if not database_url:
        raise ConfigError(
            'DATABASE_URL is not set and there is no embedded database (start one with '
            'scripts/run, which writes var/run/database_url), or set DATABASE_URL to a '
            'PostgreSQL connection string'
        )
    signup = env.get('ENABLE_ACCOUNT_SIGNUP', 'true') or 'true'
    if signup not in SIGNUP_MODES:
        raise ConfigError(
            f'ENABLE_ACCOUNT_SIGNUP must be one of {", ".join(SIGNUP_MODES)}, got '
            f'{signup!r}'
        )
    prefix = env.get('AVATAR_URL_PREFIX') or '/avatars/'
    if not prefix.endswith('/'):
        raise ConfigError(f'AVATAR_URL_PREFIX must end with "/", got {prefix!r}')
    smtp_tls = _smtp_tls(env)
    breached = (env.get('BREACHED_PASSWORD_CHECK') or 'off').lower()
    if breached not in BREACHED_CHECKS:
        raise ConfigError(
            f'BREACHED_PASSWORD_CHECK must be one of {", ".join(BREACHED_CHECKS)}, got '
            f'{breached!r}'
        )
    return Config(
        database_url=database_url,
        enable_account_signup=signup,
        hcaptcha_secret=env.get('HCAPTCHA_SECRET') or None,
        hcaptcha_verify_url=_url(
            env, 'HCAPTCHA_VERIFY_URL', 'https://api.hcaptcha.com/siteverify'
        ),
        frontend_url=_url(env, 'FRONTEND_URL', 'http://localhost:3000'),
        mail_from=env.get('MAIL_FROM') or 'Frontdesk <accounts@localhost>',
        smtp_host=env.get('SMTP_HOST') or 'localhost',
        smtp_port=_number(
            env, 'SMTP_PORT', 465 if smtp_tls == 'implicit' else 25, 1, 65535
        ),
        smtp_username=env.get('SMTP_USERNAME') or None,
        smtp_password=env.get('SMTP_PASSWORD') or None,
        smtp_tls=smtp_tls,
        avatar_dir=env.get('AVATAR_DIR') or './var/avatars',
        avatar_url_prefix=prefix,
        avatar_max_bytes=_number(
            env, 'AVATAR_MAX_BYTES', 8 * 1024 * 1024, 1024, 1024**3
        ),
        token_lifespan_days=_number(env, 'TOKEN_LIFESPAN_DAYS', 60, 1, 3650),
        bcrypt_rounds=_number(env, 'BCRYPT_ROUNDS', 12, 4, 31),
        rate_limits=_bool(env, 'RATE_LIMITS', True, true='on', false='off'),
        forwarded_allow_ips=_networks(env, 'FORWARDED_ALLOW_IPS', '127.0.0.1,::1'),
        pool_max_size=_number(env, 'DB_POOL_MAX_SIZE', 2, 1, 100),
        pool_timeout=_number(env, 'DB_POOL_TIMEOUT', 5.0, 0.1, 60, kind=float),
        cors_allowed_origins=_origins(env, 'CORS_ALLOWED_ORIGINS'),
        breached_password_check=breached,
        hibp_range_url=_url(
            env, 'HIBP_RANGE_URL', 'https://api.pwnedpasswords.com/range'
        ),
        # MAX_TOKENS_PER_USER is the old name of MAX_USER_SESSIONS, still read.
        max_user_sessions=_number(
            env,
            'MAX_USER_SESSIONS',
            _number(env, 'MAX_TOKENS_PER_USER', 25, 1, 1000),
            1,
            1000,
        ),
        session_idle_timeout_minutes=_number(
            env, 'SESSION_IDLE_TIMEOUT_MINUTES', None, 1, 525600
        ),
        audit_retention_days=_number(env, 'AUDIT_RETENTION_DAYS', 365, 1, 36500),
        reauth_window_minutes=_number(env, 'REAUTH_WINDOW_MINUTES', 15, 1, 1440),
        prepared_statements=_bool(
            env, 'DB_PREPARED_STATEMENTS', True, true='on', false='off'
        ),
        migrate_database_url=env.get('MIGRATE_DATABASE_URL')
        or (
            embedded_database_url(EMBEDDED_MIGRATE_DATABASE_URL_FILE)
            if embedded
            else None
        ),
        mail_delivery=_choice(env, 'MAIL_DELIVERY', MAIL_DELIVERIES),
        mail_dir=mail_dir(env),
        log_format=_choice(env, 'LOG_FORMAT', LOG_FORMATS),
        secret_key=_secret_key(env),
        oidc_allow_private_issuers=_bool(env, 'OIDC_ALLOW_PRIVATE_ISSUERS', False),
        account_deletion_grace_days=_number(
            env, 'ACCOUNT_DELETION_GRACE_DAYS', 7, 1, 3650
        ),
        instance_admin_email=_address(env, 'INSTANCE_ADMIN_EMAIL'),
    )


def load_or_exit(env=None):
    """Like load(), but stop the process with one line naming the variable."""
    try:
        return load(env)
    except ConfigError as ex:
        sys.stderr.write(f'frontdesk: invalid configuration: {ex}\n')
        sys.exit(2)
