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
-- address it was issued to: after an e-mail change it is void. member: whether its user
-- is still an active member of the provider's account (suspended there since the
-- callback, the provider no longer vouches for them there: SPEC 18, 19).
DELETE FROM one_time_tokens t
 USING users u
 WHERE t.token_digest = %(token_digest)s
   AND t.purpose = 'sso'
   AND t.expires_at > now()
   AND u.id = t.user_id
   AND u.email = t.email
RETURNING u.id, u.email, u.name, u.encrypted_password, t.sso_account_id, t.sso_sid,
          t.sso_sub, t.idp_second_factor,
          EXISTS (SELECT 1
                    FROM account_users au
                   WHERE au.account_id = t.sso_account_id
                     AND au.user_id = u.id
                     AND au.status = 'active') AS member;

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

-- name: enforce_state
-- Whether a way in that is not single sign-on is refused for a user (SPEC 19, Enforced):
-- a row when the user's address is in the domain of a provider that enforces it, with
-- break_glass when the user is an active administrator of that provider's account and
-- has MFA on. The user is %(user_id)s, or, for the second sign-in step, the user of the
-- MFA challenge %(challenge_digest)s when that challenge was not opened by single sign-on
-- (its sso_account_id is null): read before the step uses the challenge up.
SELECT p.account_id,
       u.mfa_enabled_at IS NOT NULL
       AND EXISTS (SELECT 1
                     FROM account_users m
                    WHERE m.account_id = p.account_id
                      AND m.user_id = u.id
                      AND m.role = 'administrator'
                      AND m.status = 'active') AS break_glass
  FROM users u
  JOIN sso_domains d ON d.domain = split_part(u.email, '@', 2)
  JOIN sso_providers p ON p.account_id = d.account_id
 WHERE u.id = coalesce(%(user_id)s::bigint,
                       (SELECT t.user_id
                          FROM one_time_tokens t
                         WHERE t.token_digest = %(challenge_digest)s::bytea
                           AND t.purpose = 'mfa_challenge'
                           AND t.sso_account_id IS NULL))
   AND p.enforce;

-- name: logout_providers
-- The providers a back-channel logout token's issuer names (sso_providers_issuer_idx):
-- several accounts may share one (Google); the token's aud picks among them.
SELECT p.account_id, p.issuer, p.client_id, p.discovery, p.jwks
  FROM sso_providers p
 WHERE p.issuer = %(issuer)s
 ORDER BY p.account_id;

-- name: logout_take_jti
-- A logout token is used once (SPEC 19): its jti is kept until it could no longer pass
-- the iat check anyway; the provider's expired ones go in the same statement (the primary
-- key's account_id prefix finds them). No row: seen before.
WITH pruned AS (
    DELETE FROM sso_logout_tokens
     WHERE account_id = %(account_id)s
       AND expires_at < now()
)
INSERT INTO sso_logout_tokens (account_id, jti, expires_at)
VALUES (%(account_id)s, %(jti)s, to_timestamp(%(iat)s) + make_interval(secs => %(keep_seconds)s))
ON CONFLICT (account_id, jti) DO NOTHING
RETURNING jti;

-- name: logout_end_sessions
-- Back-channel logout: the sessions opened through that provider session (sid), or,
-- with only sub, every single-sign-on session of that subject at that provider
-- (user_tokens_sso_sid_idx, user_tokens_sso_sub_idx). A sub sent beside a sid narrows,
-- never widens.
DELETE FROM user_tokens
 WHERE sso_account_id = ANY(%(account_ids)s::bigint[])
   AND sign_in_method = 'sso'
   AND (CASE WHEN %(sid)s::text IS NOT NULL
             THEN sso_sid = %(sid)s::text AND (%(sub)s::text IS NULL OR sso_sub = %(sub)s::text)
             ELSE sso_sub = %(sub)s::text
         END)
RETURNING id, user_id;

-- name: logout_record_refusal
-- A refused logout token's audit row (sso_backchannel_logout_refused). Anyone can post
-- one, so as for failed sign-ins of unknown addresses (audit.insert_sign_in_failure)
-- they are counted per client address, hour, reason and provider in one
-- rate_limit_counters row, and only the first of each writes its row (SPEC 14).
WITH counted AS (
    INSERT INTO rate_limit_counters AS c (bucket, window_start, hits, expires_at)
    VALUES ('audit sso_backchannel_logout_refused|ip=' || %(address_key)s || '|reason='
                || %(reason)s || '|account=' || coalesce(%(account_id)s::bigint::text, 'none'),
            date_trunc('hour', now()), 1, date_trunc('hour', now()) + interval '30 days')
    ON CONFLICT (bucket, window_start) DO UPDATE
       SET hits = c.hits + 1
    RETURNING c.hits
)
INSERT INTO audit_events (event, account_id, ip_address, user_agent, details)
SELECT 'sso_backchannel_logout_refused', %(account_id)s::bigint, %(ip_address)s, %(user_agent)s,
       %(details)s
 WHERE (SELECT hits FROM counted) = 1
RETURNING id;

-- name: attack_record_callback_failure
-- A failed callback's audit row (sso_sign_in_failed). Anyone can send a browser, or a
-- script, to the callback with a made-up state, so as for refused logout tokens
-- (logout_record_refusal) they are counted per client address, hour, reason, account
-- and user in one rate_limit_counters row, and only the first of each writes its row
-- (SPEC 14): the log cannot be grown without bound.
WITH counted AS (
    INSERT INTO rate_limit_counters AS c (bucket, window_start, hits, expires_at)
    VALUES ('audit sso_sign_in_failed|ip=' || %(address_key)s || '|reason=' || %(reason)s
                || '|account=' || coalesce(%(account_id)s::bigint::text, 'none')
                || '|subject=' || coalesce(%(subject_id)s::bigint::text, 'none'),
            date_trunc('hour', now()), 1, date_trunc('hour', now()) + interval '30 days')
    ON CONFLICT (bucket, window_start) DO UPDATE
       SET hits = c.hits + 1
    RETURNING c.hits
)
INSERT INTO audit_events (event, subject_id, account_id, ip_address, user_agent, details)
SELECT 'sso_sign_in_failed', %(subject_id)s::bigint, %(account_id)s::bigint, %(ip_address)s,
       %(user_agent)s, %(details)s
 WHERE (SELECT hits FROM counted) = 1
RETURNING id;

-- name: attack_void_issued
-- What the account's provider vouched for under the settings now replaced or deleted:
-- its flows in flight, its unused sso_auth_tokens and the MFA challenges they opened
-- (flow_mark_challenge). Each was issued under settings (issuer, client, domains,
-- trust_idp_mfa) that no longer hold; the user starts again.
WITH flows AS (
    DELETE FROM sso_flows
     WHERE account_id = %(account_id)s
)
DELETE FROM one_time_tokens
 WHERE sso_account_id = %(account_id)s
   AND purpose IN ('sso', 'mfa_challenge', 'mfa_setup')
RETURNING id;
