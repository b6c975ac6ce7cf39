-- The default outbox table and the publication outboxd subscribes to.
CREATE TABLE IF NOT EXISTS public.outbox (
    id             uuid        PRIMARY KEY,
    aggregate_type text        NOT NULL,
    aggregate_id   text        NOT NULL,
    event_type     text        NOT NULL,
    payload        jsonb       NOT NULL,
    headers        jsonb,
    created_at     timestamptz NOT NULL DEFAULT now()
);

DO $$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM pg_publication WHERE pubname = 'outboxd') THEN
        CREATE PUBLICATION outboxd FOR TABLE public.outbox WITH (publish = 'insert');
    END IF;
END
$$;
