-- outbox_emit and outbox_emit_message: emit an event from any language with
-- one SQL call, inside the caller's transaction. Both check the event the way
-- outboxd will (sink header rules included), so a bad event fails the
-- caller's statement instead of stopping the relay or landing in the
-- dead-letter subject later.

-- outbox_check_event raises invalid_parameter_value (22023) naming the bad
-- argument, or null_value_not_allowed (22004) for a missing one.
CREATE OR REPLACE FUNCTION public.outbox_check_event(
    aggregate_type text, aggregate_id text, event_type text, payload jsonb, headers jsonb)
RETURNS void
LANGUAGE plpgsql IMMUTABLE AS $$
DECLARE
    arg  text;
    val  text;
    hkey text;
    hval jsonb;
BEGIN
    FOREACH arg IN ARRAY ARRAY['aggregate_type', 'aggregate_id', 'event_type'] LOOP
        val := CASE arg WHEN 'aggregate_type' THEN outbox_check_event.aggregate_type
                        WHEN 'aggregate_id' THEN outbox_check_event.aggregate_id
                        ELSE outbox_check_event.event_type END;
        IF val IS NULL OR btrim(val) = '' THEN
            RAISE EXCEPTION 'outbox event: % is empty', arg
                USING ERRCODE = 'invalid_parameter_value',
                      HINT = 'pass a non-empty ' || arg || ', e.g. ''order'', ''42'', ''order.created''';
        END IF;
        -- These values become NATS headers (Outbox-Aggregate-Type, ...):
        -- a CR or LF would end the header line.
        IF val ~ '[[:cntrl:]]' THEN
            RAISE EXCEPTION 'outbox event: % % holds a control character', arg, quote_literal(val)
                USING ERRCODE = 'invalid_parameter_value',
                      HINT = 'remove line breaks, tabs and other control characters';
        END IF;
    END LOOP;
    IF payload IS NULL THEN
        RAISE EXCEPTION 'outbox event: payload is NULL'
            USING ERRCODE = 'null_value_not_allowed',
                  HINT = 'pass a JSON value, e.g. ''{}''::jsonb for an event without data';
    END IF;
    IF headers IS NULL THEN
        RETURN;
    END IF;
    IF jsonb_typeof(headers) <> 'object' THEN
        RAISE EXCEPTION 'outbox event: headers is a JSON %, want an object of strings', jsonb_typeof(headers)
            USING ERRCODE = 'invalid_parameter_value',
                  HINT = 'pass e.g. ''{"Trace-Id": "abc"}''::jsonb, or NULL for none';
    END IF;
    FOR hkey, hval IN SELECT key, value FROM jsonb_each(headers) LOOP
        -- The NATS client refuses these names (nats.ErrBadHeaderMsg).
        IF hkey !~ '^[!-~]+$' OR hkey ~ '["(),/:;<=>?@\[\\\]{}]' THEN
            RAISE EXCEPTION 'outbox event: header name % is not a valid NATS header name', quote_literal(hkey)
                USING ERRCODE = 'invalid_parameter_value',
                      HINT = 'use printable ASCII without spaces or any of "()/,:;<=>?@[\]{}';
        END IF;
        -- outboxd drops Nats-* headers from events: they steer JetStream.
        IF lower(hkey) LIKE 'nats-%' THEN
            RAISE EXCEPTION 'outbox event: header % is reserved for JetStream', quote_literal(hkey)
                USING ERRCODE = 'invalid_parameter_value',
                      HINT = 'outboxd sets Nats-Msg-Id from the event id; use another header name';
        END IF;
        IF jsonb_typeof(hval) <> 'string' THEN
            RAISE EXCEPTION 'outbox event: header % is a JSON %, want a string', quote_literal(hkey), jsonb_typeof(hval)
                USING ERRCODE = 'invalid_parameter_value',
                      HINT = 'quote the value, e.g. {"Attempt": "3"}';
        END IF;
        -- The same rule as outboxd's: tabs pass, other control characters do not.
        IF (hval #>> '{}') ~ '[\x01-\x08\x0a-\x1f\x7f]' THEN
            RAISE EXCEPTION 'outbox event: header % holds a control character', quote_literal(hkey)
                USING ERRCODE = 'invalid_parameter_value',
                      HINT = 'header values must be printable: remove line breaks and tabs';
        END IF;
    END LOOP;
END
$$;

-- outbox_emit inserts one event into public.outbox in the caller's
-- transaction and returns its id (the message's Nats-Msg-Id).
CREATE OR REPLACE FUNCTION public.outbox_emit(
    aggregate_type text, aggregate_id text, event_type text, payload jsonb, headers jsonb DEFAULT NULL)
RETURNS uuid
LANGUAGE plpgsql VOLATILE AS $$
DECLARE
    new_id uuid := gen_random_uuid();
BEGIN
    PERFORM public.outbox_check_event(aggregate_type, aggregate_id, event_type, payload, headers);
    INSERT INTO public.outbox (id, aggregate_type, aggregate_id, event_type, payload, headers)
    VALUES (new_id, outbox_emit.aggregate_type, outbox_emit.aggregate_id, outbox_emit.event_type,
            outbox_emit.payload, outbox_emit.headers);
    RETURN new_id;
END
$$;

-- outbox_emit_message emits one event as a transactional logical decoding
-- message with prefix 'outbox' (no table row, no table bloat) and returns
-- its id. The envelope is the one README "Logical-message mode" documents.
CREATE OR REPLACE FUNCTION public.outbox_emit_message(
    aggregate_type text, aggregate_id text, event_type text, payload jsonb, headers jsonb DEFAULT NULL)
RETURNS uuid
LANGUAGE plpgsql VOLATILE AS $$
DECLARE
    new_id   uuid := gen_random_uuid();
    envelope jsonb;
BEGIN
    PERFORM public.outbox_check_event(aggregate_type, aggregate_id, event_type, payload, headers);
    envelope := jsonb_build_object(
        'id', new_id, 'aggregate_type', aggregate_type, 'aggregate_id', aggregate_id,
        'event_type', event_type, 'payload', payload);
    IF headers IS NOT NULL THEN
        envelope := envelope || jsonb_build_object('headers', headers);
    END IF;
    PERFORM pg_logical_emit_message(true, 'outbox', envelope::text);
    RETURN new_id;
END
$$;
