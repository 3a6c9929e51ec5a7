-- erase_user_trail (0021) checks only that the users row is gone, which any id nobody has
-- passes; it then deleted every audit row with a details value equal to one of the texts
-- given. So the application's role could remove any row of a live account or person by
-- naming a value in it ('erase_user_trail(-1, ARRAY['<an IP address>'])'). Its
-- addresses now count only when they are shaped as an address (one '@', something on
-- each side, no blank), lower-cased as stored addresses are, and still only those no
-- existing user holds. CREATE OR REPLACE keeps the function's owner and grants.
CREATE OR REPLACE FUNCTION erase_user_trail(p_user_id bigint, p_addresses text[]) RETURNS bigint
LANGUAGE plpgsql SECURITY DEFINER SET search_path = public, pg_temp AS $$
DECLARE
    erased bigint;
    cleared bigint;
    addresses text[];
BEGIN
    IF EXISTS (SELECT FROM users WHERE id = p_user_id) THEN
        RAISE EXCEPTION 'user % is not erased: their audit rows stay', p_user_id;
    END IF;
    SELECT coalesce(array_agg(DISTINCT a), '{}') INTO addresses
      FROM unnest(p_addresses) AS given(address),
           lower(given.address) AS a
     WHERE a ~ '^[^@[:space:]]+@[^@[:space:]]+$'
       AND NOT EXISTS (SELECT FROM users u
                        WHERE u.email = a OR u.unconfirmed_email = a);
    DELETE FROM audit_events e
     WHERE e.subject_id = p_user_id
        OR (cardinality(addresses) > 0
            AND EXISTS (SELECT FROM jsonb_each_text(e.details) d
                         WHERE lower(d.value) = ANY (addresses)));
    GET DIAGNOSTICS erased = ROW_COUNT;
    UPDATE audit_events
       SET actor_id = NULL, session_id = NULL, ip_address = NULL, user_agent = NULL
     WHERE actor_id = p_user_id;
    GET DIAGNOSTICS cleared = ROW_COUNT;
    UPDATE account_deletions SET scheduled_by = NULL WHERE scheduled_by = p_user_id;
    RETURN erased + cleared;
END
$$;
