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

-- name: settings_current
-- An account's settings as its administrators see them (SPEC 19): never the secret, only
-- that one is stored; the domains sorted.
SELECT p.issuer, p.client_id, p.jit_provisioning, p.enforce, p.trust_idp_mfa,
       ARRAY(SELECT d.domain FROM sso_domains d
              WHERE d.account_id = p.account_id ORDER BY d.domain) AS allowed_domains
  FROM sso_providers p
 WHERE p.account_id = %(account_id)s;

-- name: settings_domain_claims
-- Per domain asked for: whether another account's provider has it (sso_domains' primary
-- key), and whether an active administrator of this account has a confirmed address in
-- exactly that domain (SPEC 19: the proof of a mailbox there). Addresses are stored
-- lower-cased and hold one @.
SELECT asked.domain,
       EXISTS (SELECT 1
                 FROM sso_domains d
                WHERE d.domain = asked.domain
                  AND d.account_id <> %(account_id)s) AS claimed_elsewhere,
       EXISTS (SELECT 1
                 FROM account_users au
                 JOIN users u ON u.id = au.user_id
                WHERE au.account_id = %(account_id)s
                  AND au.role = 'administrator'
                  AND au.status = 'active'
                  AND u.confirmed_at IS NOT NULL
                  AND split_part(u.email, '@', 2) = asked.domain) AS proven
  FROM unnest(%(domains)s::text[]) AS asked (domain)
 ORDER BY asked.domain;

-- name: settings_upsert
-- A null client secret keeps the stored one (read here, not in ON CONFLICT: the row to
-- insert is checked NOT NULL first; the caller holds the account row, so no other
-- write of it runs between). A new issuer has other keys: the cached JWKS goes with
-- the old one.
INSERT INTO sso_providers (account_id, issuer, client_id, client_secret_encrypted,
                           jit_provisioning, enforce, trust_idp_mfa, discovery)
VALUES (%(account_id)s, %(issuer)s, %(client_id)s,
        COALESCE(%(client_secret_encrypted)s,
                 (SELECT client_secret_encrypted FROM sso_providers
                   WHERE account_id = %(account_id)s)),
        %(jit_provisioning)s, %(enforce)s, %(trust_idp_mfa)s, %(discovery)s)
    ON CONFLICT (account_id) DO UPDATE
   SET issuer = EXCLUDED.issuer,
       client_id = EXCLUDED.client_id,
       client_secret_encrypted = EXCLUDED.client_secret_encrypted,
       jit_provisioning = EXCLUDED.jit_provisioning,
       enforce = EXCLUDED.enforce,
       trust_idp_mfa = EXCLUDED.trust_idp_mfa,
       discovery = EXCLUDED.discovery,
       discovery_fetched_at = now(),
       jwks = CASE WHEN sso_providers.issuer = EXCLUDED.issuer
                   THEN sso_providers.jwks END,
       jwks_fetched_at = CASE WHEN sso_providers.issuer = EXCLUDED.issuer
                              THEN sso_providers.jwks_fetched_at END,
       updated_at = now()
RETURNING account_id;

-- name: settings_drop_domains
-- The domains of the account that the new set leaves out.
DELETE FROM sso_domains
 WHERE account_id = %(account_id)s
   AND domain <> ALL (%(domains)s::text[]);

-- name: settings_claim_domains
-- Every domain of the new set for the account. One that another account's provider
-- holds, or took while this transaction ran (its insert committed first: the primary
-- key waited for it), is updated by no row and so missing from what this returns: the
-- caller answers 422 naming it, never the 500 of a unique violation.
INSERT INTO sso_domains (domain, account_id)
SELECT asked.domain, %(account_id)s
  FROM unnest(%(domains)s::text[]) AS asked (domain)
    ON CONFLICT (domain) DO UPDATE
   SET account_id = EXCLUDED.account_id
 WHERE sso_domains.account_id = EXCLUDED.account_id
RETURNING domain;

-- name: settings_delete
-- The provider and, by cascade, its domains, flows and seen logout tokens.
DELETE FROM sso_providers p
 WHERE p.account_id = %(account_id)s
RETURNING p.issuer,
          ARRAY(SELECT d.domain FROM sso_domains d
                 WHERE d.account_id = p.account_id ORDER BY d.domain) AS allowed_domains;

-- name: settings_administrators
-- Who is mailed about a change of the settings: every active administrator, and the
-- account's name for the message.
SELECT u.id, u.email, u.name, a.name AS account_name
  FROM account_users au
  JOIN users u ON u.id = au.user_id
  JOIN accounts a ON a.id = au.account_id
 WHERE au.account_id = %(account_id)s
   AND au.role = 'administrator'
   AND au.status = 'active'
 ORDER BY u.id;
