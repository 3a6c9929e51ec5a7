"""An account's identity provider (SPEC 19), as the flow, the settings and the
back channel read it: a row of sso_providers, its client secret sealed at rest."""

from services import addresses
import tokens

# The label of the client secrets' key (tokens.seal), apart from the TOTP secrets'.
_SEAL_LABEL = b'frontdesk sso client-secret aes-256-gcm v1'


def _associated_data(account_id):
    # Binds the ciphertext to its row: copied onto another account it does not decrypt.
    return b'frontdesk sso_providers.client_secret account_id=%d' % account_id


def seal_secret(config, account_id, secret):
    return tokens.seal(
        config.secret_key, _SEAL_LABEL, _associated_data(account_id), secret
    )


def client_secret(config, provider):
    """The provider's client secret; None when it cannot be read with this key."""
    return tokens.unseal(
        config.secret_key,
        _SEAL_LABEL,
        _associated_data(provider['account_id']),
        provider['client_secret_encrypted'],
    )


def domain_of(email):
    """The domain part of an address, normalised; None when it is no address."""
    if not addresses.is_valid(email):
        return None
    return addresses.normalise(email).rpartition('@')[2]


def for_address(conn, queries, email):
    """The provider that speaks for ``email``'s domain, or None."""
    domain = domain_of(email)
    if domain is None:
        return None
    return conn.execute(
        queries['sso.provider_for_domain'], {'domain': domain}
    ).fetchone()
