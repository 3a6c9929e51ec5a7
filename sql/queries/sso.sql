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

-- name: flow_start
-- A flow between its start and its callback (SPEC 19), kept 10 minutes. Flows nobody
-- finished go as new ones start, so the table stays as small as the flows in flight.
WITH expired AS (
    DELETE FROM sso_flows
     WHERE expires_at <= now()
)
INSERT INTO sso_flows (id_digest, state_digest, nonce, code_verifier, account_id, email,
                       target, expires_at)
VALUES (%(id_digest)s, %(state_digest)s, %(nonce)s, %(code_verifier)s, %(account_id)s,
        %(email)s, %(target)s, now() + interval '10 minutes')
RETURNING account_id;

-- name: flow_take
-- The flow of the fd_sso cookie whose state the provider sent back, used up as it is read
-- (single use: a replayed callback finds nothing), with its provider. No row: no such
-- live flow for this browser.
WITH taken AS (
    DELETE FROM sso_flows
     WHERE id_digest = %(id_digest)s
       AND state_digest = %(state_digest)s
       AND expires_at > now()
    RETURNING nonce, code_verifier, account_id, email, target
)
SELECT t.nonce, t.code_verifier, t.email AS flow_email, t.target,
       p.account_id, p.issuer, p.client_id, p.client_secret_encrypted, p.discovery, p.jwks,
       p.jit_provisioning, p.enforce, p.trust_idp_mfa
  FROM taken t
  JOIN sso_providers p USING (account_id);

-- name: flow_domain_allowed
-- Whether the provider of account_id speaks for the domain of the ID token's address.
SELECT EXISTS (SELECT 1
                 FROM sso_domains
                WHERE domain = %(domain)s
                  AND account_id = %(account_id)s) AS allowed;

-- name: flow_user
-- The user of the provider's verified address, and their membership of the provider's
-- account (status null: none). The user row is locked first, as every credential change
-- and every session issue does (services/memberships.py gives the order); the membership
-- row is only read. No row: no user has that address.
SELECT u.id, u.email, u.name, u.confirmed_at IS NOT NULL AS confirmed,
       au.status AS membership_status
  FROM users u
  LEFT JOIN account_users au ON au.user_id = u.id AND au.account_id = %(account_id)s
 WHERE u.email = %(email)s
   FOR UPDATE OF u;

-- name: flow_confirm
-- The provider's verified address proves the mailbox: the first confirmation by its owner
-- (SPEC 19, 3.4), which also clears the password chosen at sign-up, perhaps by someone
-- else. previous_email is the address the user's sessions carried (sign_up_origin).
UPDATE users
   SET confirmed_at = now(),
       encrypted_password = NULL,
       updated_at = now()
 WHERE id = %(user_id)s
   AND confirmed_at IS NULL
RETURNING id AS user_id, email, email AS previous_email, true AS first_confirmation;

-- name: flow_issue_token
-- The one-time sso_auth_token (5 minutes) of a callback, bound to the user and carrying
-- what the session it opens records. It replaces an earlier one of the user.
WITH dropped AS (
    DELETE FROM one_time_tokens
     WHERE user_id = %(user_id)s
       AND purpose = 'sso'
)
INSERT INTO one_time_tokens (user_id, purpose, email, token_digest, expires_at,
                             sso_account_id, sso_sid, sso_sub, idp_second_factor)
VALUES (%(user_id)s, 'sso', %(email)s, %(token_digest)s, now() + interval '5 minutes',
        %(account_id)s, %(sid)s, %(sub)s, %(idp_second_factor)s)
RETURNING id;

-- name: flow_take_token
-- Uses up a live sso_auth_token (sign_in.use_link, with the user row locked first), with
-- what sessions.sign_in needs of the user and what the session records. Only for the
-- address it was issued to: after an e-mail change it is void.
DELETE FROM one_time_tokens t
 USING users u
 WHERE t.token_digest = %(token_digest)s
   AND t.purpose = 'sso'
   AND t.expires_at > now()
   AND u.id = t.user_id
   AND u.email = t.email
RETURNING u.id, u.email, u.name, u.encrypted_password, t.sso_account_id, t.sso_sid,
          t.sso_sub, t.idp_second_factor;

-- name: flow_mark_challenge
-- The MFA challenge that follows an sso_auth_token carries its single-sign-on data, so
-- that the session the second step opens records them.
UPDATE one_time_tokens
   SET sso_account_id = %(sso_account_id)s,
       sso_sid = %(sso_sid)s,
       sso_sub = %(sso_sub)s
 WHERE token_digest = %(token_digest)s
   AND purpose IN ('mfa_challenge', 'mfa_setup')
RETURNING id;

-- name: flow_challenge_sso
-- The single-sign-on data of an MFA challenge (flow_mark_challenge); no row: the
-- challenge came from a password or a link.
SELECT sso_account_id, sso_sid, sso_sub, false AS idp_second_factor
  FROM one_time_tokens
 WHERE token_digest = %(token_digest)s
   AND purpose = 'mfa_challenge'
   AND sso_sub IS NOT NULL;
