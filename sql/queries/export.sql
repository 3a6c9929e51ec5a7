-- name: document
-- Everything stored about one user (SPEC 20), as the JSON text of GET
-- /api/v1/profile/export. services/export.py declares the columns each part holds
-- (EXPORTED) and those it withholds with the reason (EXCLUDED, sent as withheld);
-- tests/test_export.py holds that declaration to the database catalogue. Each part lists
-- every row the user has, except the audit events and mails: those of the retention
-- window (AUDIT_RETENTION_DAYS), newest first, at most %(max_rows)s each (the *_truncated
-- flag says more exist). An audit row another user did to this one names the actor and
-- nothing more (their address, device and session are theirs: as audit.for_user). Mails
-- are the user's (mail_outbox.user_id, migration 0022), whatever address they went to;
-- of the mails of nobody's account (user_id NULL: every one written before 0022, and
-- links asked for an address no account had), those sent to the user's own address since
-- the user exists. Not those to an address they only asked to move to: anyone may ask for
-- any address, and would then read the subjects of mail nobody owns to it.
-- Each of those two parts is two index scans, not a read of its table (migration 0024):
-- audit_events_subject_idx or audit_events_actor_idx, mail_outbox_user_id_idx or
-- mail_outbox_unowned_to_address_idx (so the address is compared as stored, no lower()).
WITH u AS (
    SELECT * FROM users WHERE id = %(user_id)s
), events AS (
    SELECT CASE WHEN e.actor_id IS NULL OR e.actor_id = %(user_id)s THEN e
                ELSE (e.id, e.created_at, e.event, e.actor_id, e.subject_id, e.account_id,
                      NULL, NULL, NULL, e.details)::audit_events
           END AS e
      FROM audit_events e
     WHERE (e.subject_id = %(user_id)s OR e.actor_id = %(user_id)s)
       AND e.created_at > now() - make_interval(days => %(retention_days)s)
     ORDER BY e.id DESC
     LIMIT %(max_rows)s + 1
), mails AS (
    SELECT m.id, m.kind, m.to_address, m.subject, m.status, m.message_id, m.created_at, m.sent_at
      FROM mail_outbox m, u
     WHERE m.created_at > now() - make_interval(days => %(retention_days)s)
       AND (m.user_id = u.id
            OR (m.user_id IS NULL
                AND m.to_address = u.email
                AND m.created_at >= u.created_at))
     ORDER BY m.id DESC
     LIMIT %(max_rows)s + 1
)
SELECT json_build_object(
    'format', 'frontdesk-export/1',
    'user_id', u.id,
    'exported_at', iso8601(now()),
    'retention_days', %(retention_days)s::integer,
    'withheld', %(withheld)s::json,
    'profile', json_build_object(
        'id', u.id,
        'name', u.name,
        'display_name', u.display_name,
        'email', u.email,
        'unconfirmed_email', u.unconfirmed_email,
        'confirmed_at', iso8601(u.confirmed_at),
        'custom_attributes', u.custom_attributes,
        'ui_settings', u.ui_settings,
        'message_signature', u.message_signature,
        'avatar', u.avatar,
        'created_at', iso8601(u.created_at),
        'updated_at', iso8601(u.updated_at),
        'last_sign_in_at', iso8601(u.last_sign_in_at)),
    'mfa', json_build_object(
        'enabled', u.mfa_enabled_at IS NOT NULL,
        'mfa_enabled_at', iso8601(u.mfa_enabled_at),
        'otp_last_step', u.otp_last_step,
        'recovery_codes_remaining', (SELECT count(*)
                                       FROM mfa_recovery_codes c
                                      WHERE c.user_id = u.id AND c.used_at IS NULL)::integer,
        'recovery_codes', (SELECT COALESCE(json_agg(json_build_object(
                                      'id', c.id,
                                      'user_id', c.user_id,
                                      'used_at', iso8601(c.used_at),
                                      'created_at', iso8601(c.created_at)) ORDER BY c.id), '[]')
                             FROM mfa_recovery_codes c
                            WHERE c.user_id = u.id)),
    'memberships', (SELECT COALESCE(json_agg(json_build_object(
                               'id', au.id,
                               'account_id', au.account_id,
                               'account_name', a.name,
                               'user_id', au.user_id,
                               'role', au.role,
                               'status', au.status,
                               'availability', au.availability,
                               'auto_offline', au.auto_offline,
                               'active_at', iso8601(au.active_at),
                               'created_at', iso8601(au.created_at),
                               'updated_at', iso8601(au.updated_at)) ORDER BY au.account_id), '[]')
                      FROM account_users au
                      JOIN accounts a ON a.id = au.account_id
                     WHERE au.user_id = u.id),
    'sessions', (SELECT COALESCE(json_agg(json_build_object(
                            'id', t.id,
                            'user_id', t.user_id,
                            'client', t.client,
                            'current', t.id IS NOT DISTINCT FROM %(session_id)s,
                            'sign_in_method', t.sign_in_method,
                            'created_at', iso8601(t.created_at),
                            'last_used_at', iso8601(t.last_used_at),
                            'authenticated_at', iso8601(t.authenticated_at),
                            'expires_at', iso8601(t.expires_at),
                            'used', t.used,
                            'ip_address', t.ip_address,
                            'user_agent', t.user_agent,
                            'client_name', t.client_name,
                            'browser_name', t.browser_name,
                            'browser_version', t.browser_version,
                            'platform_name', t.platform_name,
                            'platform_version', t.platform_version,
                            'device_name', t.device_name,
                            'sso_account_id', t.sso_account_id,
                            'sso_sub', t.sso_sub,
                            'sso_sid', t.sso_sid) ORDER BY t.id DESC), '[]')
                   FROM user_tokens t
                  WHERE t.user_id = u.id),
    'personal_access_tokens', (SELECT COALESCE(json_agg((personal_access_token_json(p)::jsonb
                                           || jsonb_build_object('user_id', p.user_id))
                                          ORDER BY p.id DESC), '[]')
                                 FROM personal_access_tokens p
                                WHERE p.user_id = u.id),
    'links', (SELECT COALESCE(json_agg(json_build_object(
                         'id', o.id,
                         'user_id', o.user_id,
                         'purpose', o.purpose,
                         'email', o.email,
                         'created_at', iso8601(o.created_at),
                         'expires_at', iso8601(o.expires_at),
                         'failed_attempts', o.failed_attempts,
                         'mfa_enabled_at', iso8601(o.mfa_enabled_at),
                         'sso_account_id', o.sso_account_id,
                         'sso_sub', o.sso_sub,
                         'sso_sid', o.sso_sid,
                         'idp_second_factor', o.idp_second_factor) ORDER BY o.id DESC), '[]')
                FROM one_time_tokens o
               WHERE o.user_id = u.id),
    'email_change_requests', (SELECT COALESCE(json_agg(json_build_object(
                                         'id', r.id,
                                         'user_id', r.user_id,
                                         'created_at', iso8601(r.created_at)) ORDER BY r.id DESC), '[]')
                                FROM email_change_requests r
                               WHERE r.user_id = u.id),
    'sso_sign_ins_in_progress', (SELECT COALESCE(json_agg(json_build_object(
                                            'account_id', f.account_id,
                                            'email', f.email,
                                            'target', f.target,
                                            'created_at', iso8601(f.created_at),
                                            'expires_at', iso8601(f.expires_at)) ORDER BY f.created_at DESC), '[]')
                                   FROM sso_flows f
                                  WHERE f.email = u.email),
    'account_deletions_requested', (SELECT COALESCE(json_agg(json_build_object(
                                               'id', a.id,
                                               'name', a.name,
                                               'deletion_requested_by', a.deletion_requested_by,
                                               'deletion_requested_at', iso8601(a.deletion_requested_at),
                                               'deletion_due_at', iso8601(a.deletion_due_at)) ORDER BY a.id), '[]')
                                      FROM accounts a
                                     WHERE a.deletion_requested_by = u.id),
    'account_deletions_done', (SELECT COALESCE(json_agg(json_build_object(
                                          'account_id', d.account_id,
                                          'scheduled_by', d.scheduled_by,
                                          'scheduled_at', iso8601(d.scheduled_at),
                                          'deleted_at', iso8601(d.deleted_at),
                                          'reason', d.reason) ORDER BY d.account_id), '[]')
                                 FROM account_deletions d
                                WHERE d.scheduled_by = u.id),
    'audit_events', (SELECT COALESCE(json_agg(audit_event_json(page.e) ORDER BY (page.e).id DESC), '[]')
                       FROM (SELECT events.e FROM events ORDER BY (events.e).id DESC LIMIT %(max_rows)s) AS page),
    'audit_events_truncated', (SELECT count(*) > %(max_rows)s FROM events),
    'mails', (SELECT COALESCE(json_agg(json_build_object(
                         'id', m.id,
                         'kind', m.kind,
                         'to_address', m.to_address,
                         'subject', m.subject,
                         'status', m.status,
                         'message_id', m.message_id,
                         'created_at', iso8601(m.created_at),
                         'sent_at', iso8601(m.sent_at)) ORDER BY m.id DESC), '[]')
                FROM (SELECT * FROM mails ORDER BY id DESC LIMIT %(max_rows)s) AS m),
    'mails_truncated', (SELECT count(*) > %(max_rows)s FROM mails)
)::text AS doc
  FROM u;
