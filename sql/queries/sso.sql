-- name: keys_claim_refresh
-- SPEC 19: the JWKS is fetched again (a token names a key not in it) at most once a
-- minute per provider, across every worker and host: the caller that moves
-- jwks_fetched_at gets the row and fetches; the others use the keys they have.
UPDATE sso_providers
   SET jwks_fetched_at = now()
 WHERE account_id = %(account_id)s
   AND (jwks_fetched_at IS NULL OR jwks_fetched_at < now() - interval '1 minute')
RETURNING account_id;

-- name: keys_store
UPDATE sso_providers
   SET jwks = %(jwks)s
 WHERE account_id = %(account_id)s;

-- name: keys_current
SELECT jwks
  FROM sso_providers
 WHERE account_id = %(account_id)s;

-- name: provider_for_domain
-- The provider that speaks for an address's domain (SPEC 19), with what a flow needs.
SELECT p.account_id, p.issuer, p.client_id, p.client_secret_encrypted, p.discovery, p.jwks,
       p.jit_provisioning, p.enforce, p.trust_idp_mfa
  FROM sso_domains d
  JOIN sso_providers p USING (account_id)
 WHERE d.domain = %(domain)s;

-- name: provider_of_account
SELECT p.account_id, p.issuer, p.client_id, p.client_secret_encrypted, p.discovery, p.jwks,
       p.jit_provisioning, p.enforce, p.trust_idp_mfa
  FROM sso_providers p
 WHERE p.account_id = %(account_id)s;
