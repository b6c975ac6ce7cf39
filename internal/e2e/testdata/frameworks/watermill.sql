-- Watermill's SQL Pub/Sub (watermill-sql) with its default PostgreSQL schema
-- adapter: the messages table it creates for a topic, and rows as its publisher
-- inserts them. Topic "orders" -> table "watermill_orders".
--
-- Sources (public source read through the search index):
--   ThreeDotsLabs/watermill-sql pkg/sql/schema_adapter_postgresql.go
--     - the current version (index copy, commit not shown; the one with
--       GeneratePayloadType, InitializeSchemaLock and the xid8/pg_snapshot_xmin
--       ordering): SchemaInitializingQueries (the DDL below, after
--       "SELECT pg_advisory_xact_lock(<lock>)" in the same transaction),
--       InsertQuery "INSERT INTO <table> (uuid, payload, metadata, transaction_id)
--       VALUES ($1,$2,$3,pg_current_xact_id()),..." (one row per message of a
--       Publish call, in one statement), PayloadColumnType (JSON unless
--       GeneratePayloadType says otherwise, e.g. BYTEA), MessagesTable
--       (`"watermill_%s"` of the topic);
--     - @ 1a52a44a4aca98105c4a7b8172e9708b852e6b87: the older schema ("offset" SERIAL,
--       no transaction_id), for comparison.
--   ThreeDotsLabs/watermill-sql pkg/sql/schema_adapter.go (index copy): defaultInsertArgs
--     passes msg.UUID, []byte(msg.Payload), json.Marshal(msg.Metadata).
--   ThreeDotsLabs/watermill components/cqrs/marshaler_json.go and name.go
--     @ c420641a720f3b57882b93265ef8680fcee7f1ea: the CQRS JSON marshaler
--     (payload = json.Marshal(event), metadata "name" = "<package>.<Type>", uuid =
--     watermill.NewUUID()).
--
-- How the columns are filled:
--   offset          BIGSERIAL, assigned on insert: order within a transaction.
--   uuid            the message UUID (a random v4 string): the message id.
--   created_at      DEFAULT CURRENT_TIMESTAMP into a timestamp WITHOUT time zone:
--                   the transaction's start time in the session's TimeZone, the same
--                   for every row of a transaction.
--   payload         the message payload bytes as given; in a JSON column they must
--                   be valid JSON and are stored (and streamed) as the exact text.
--                   With GeneratePayloadType returning BYTEA, any bytes.
--   metadata        json.Marshal of the map[string]string metadata: an object of
--                   string values, keys sorted, '<' '>' '&' escaped as \u003c...;
--                   "{}" when there is none. The CQRS event bus sets "name".
--   transaction_id  pg_current_xact_id() of the inserting transaction.
-- Watermill's own subscriber reads in (transaction_id, offset) order and only below
-- pg_snapshot_xmin; it also creates a "watermill_offsets_orders" table, not needed here.

CREATE TABLE IF NOT EXISTS "watermill_orders" (
	"offset" BIGSERIAL,
	"uuid" VARCHAR(36) NOT NULL,
	"created_at" TIMESTAMP NOT NULL DEFAULT CURRENT_TIMESTAMP,
	"payload" JSON DEFAULT NULL,
	"metadata" JSON DEFAULT NULL,
	"transaction_id" xid8 NOT NULL,
	PRIMARY KEY ("transaction_id", "offset")
);

-- @rows
-- Example rows, with the statements Watermill's publisher issues (created_at and
-- offset from their defaults). The values are made up for these tests.

-- Transaction 1: a handler, with the SQL publisher bound to its transaction,
-- publishes two events through the CQRS event bus, one Publish call each.
BEGIN;
INSERT INTO "watermill_orders" (uuid, payload, metadata, transaction_id) VALUES ('9f1c2e7a-4b3d-4f6e-8a2b-1c3d5e7f9a0b','{"order_id":"8d2c4f0e-6b1a-4c3e-9f57-2a9b1c7d4e10","amount_cents":5990,"currency":"EUR","paid_at":"2024-03-14T09:26:53.412778+01:00"}','{"name":"events.OrderPaid"}',pg_current_xact_id());
INSERT INTO "watermill_orders" (uuid, payload, metadata, transaction_id) VALUES ('2c7e9a41-5d3b-4f8e-9a6c-7b1d3f5a9e02','{"order_id":"8d2c4f0e-6b1a-4c3e-9f57-2a9b1c7d4e10","invoice_to":"Tom \u0026 Jerry Ltd"}','{"correlation_id":"01HS0Q8J6ZK3V9X2B7M4N5P8RT","name":"events.InvoiceRequested"}',pg_current_xact_id());
COMMIT;

-- Transaction 2: a plain publisher.Publish("orders", msg1, msg2): one INSERT for
-- both messages; the first without metadata.
BEGIN;
INSERT INTO "watermill_orders" (uuid, payload, metadata, transaction_id) VALUES ('5e8a1c3f-7b9d-4e2a-b6c8-0d2f4a6c8e13','{"order_id":"8d2c4f0e-6b1a-4c3e-9f57-2a9b1c7d4e10","carrier":"DHL","tracking_no":"JJD000390007817652"}','{}',pg_current_xact_id()),('b3d5f7a9-1c3e-4a5b-8d7f-9e1a3c5e7b24','{"order_id":"8d2c4f0e-6b1a-4c3e-9f57-2a9b1c7d4e10","status":"delivered"}','{"priority":"low"}',pg_current_xact_id());
COMMIT;
