-- Debezium's outbox event router (io.debezium.transforms.outbox.EventRouter): the
-- outbox table the SMT's default configuration expects, with the optional
-- tracing column, and rows as an application (Debezium's Quarkus outbox
-- extension, or plain SQL) writes them.
--
-- Sources (public source read through the search index):
--   debezium/debezium
--     documentation/modules/ROOT/pages/transformations/outbox-event-router.adoc
--       @ 013581962634deea64f0dcc2e6c0b513db2af942   ("Basic outbox table": id uuid not null,
--         aggregatetype/aggregateid/type character varying(255) not null, payload jsonb;
--         route.by.field=aggregatetype, route.topic.replacement=outbox.event.${routedByValue},
--         table.field.event.key=aggregateid, event id in the "id" header,
--         route.tombstone.on.empty.payload, tracing.span.context.field=tracingspancontext)
--     documentation/modules/ROOT/pages/integrations/tracing.adoc
--       @ 5903e84dba6990c4c4f4c608f4ab373ad2155de2   (the span context is written "as a serialized
--                                                     instance of java.util.Properties")
--     documentation/modules/ROOT/pages/integrations/outbox.adoc
--       @ 03659540312677cf4a7153f09c5009dc04dda61a   (Quarkus extension: table OutboxEvent, column
--         definitions, tracingspancontext VARCHAR(256), remove-after-insert default true)
--     debezium-quarkus-outbox .../internal/DebeziumTracerEventDispatcher.java and
--     DataMapTracingSetter.java (index copies, commit not shown): the OpenTelemetry
--     propagator's keys go through Properties.store(writer, null) into the column.
--   debezium/debezium-examples outbox/register-postgres.json,
--     outbox/order-service/.../event/OrderCreatedEvent.java
--       @ 28dbebde10a2b7298236061a7f9f5c284a93c460   (table inventory.outboxevent,
--         aggregatetype "Order", type "OrderCreated", aggregateid the order id)
--
-- How the columns are filled:
--   id             a random UUID per event; the router puts it in the "id" header (dedup key).
--   aggregatetype  the routing value: the topic is "outbox.event.<aggregatetype>" by default.
--   aggregateid    the message key (ordering per aggregate), e.g. an order number as text.
--   type           the event type, e.g. "OrderCreated" (only emitted when configured
--                  as an additional field, e.g. type:header:eventType).
--   payload        the event as JSON; jsonb, so PostgreSQL normalizes it (key order,
--                  spacing) and what is streamed is jsonb's text form, not the text
--                  inserted. NULL payload = a tombstone (with
--                  route.tombstone.on.empty.payload=true Debezium emits a record with
--                  a null value under the aggregateid key, i.e. "delete this key").
--   tracingspancontext  optional; java.util.Properties.store() output: a "#<date>"
--                  comment line, then "traceparent=<W3C traceparent>", each line ending
--                  in the JVM's line separator (LF on Linux). NULL when tracing is off.
-- The Quarkus extension by default deletes each row right after inserting it, in
-- the same transaction (remove-after-insert=true): the table stays empty and only
-- the change stream carries the events. The last example transaction does that.
-- The PRIMARY KEY is not in the documented column listing, but the extension maps
-- id as the entity id, and a table in a publication that publishes deletes needs a
-- replica identity for that DELETE to succeed.

CREATE TABLE outboxevent (
    id uuid NOT NULL,
    aggregatetype character varying(255) NOT NULL,
    aggregateid character varying(255) NOT NULL,
    type character varying(255) NOT NULL,
    payload jsonb,
    tracingspancontext character varying(256),
    PRIMARY KEY (id)
);

-- @rows
-- Example rows. The values are made up for these tests; their shape follows the
-- sources above.

-- Transaction 1: order 1001 is created (traced request).
BEGIN;
INSERT INTO outboxevent (id, aggregatetype, aggregateid, type, payload, tracingspancontext)
VALUES ('4d47e190-0402-4048-bc2c-89dd54343cdc', 'Order', '1001', 'OrderCreated',
        '{"id": 1001, "customerId": 42, "orderDate": "2024-03-14T09:26:53", "lineItems": [{"id": 1, "item": "Debezium in Action", "status": "ENTERED", "quantity": 2, "totalPrice": 39.98}, {"id": 2, "item": "Debezium for Dummies", "status": "ENTERED", "quantity": 1, "totalPrice": 29.99}]}',
        E'#Thu Mar 14 08:26:53 UTC 2024\ntraceparent=00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01\n');
COMMIT;

-- Transaction 2: a line of order 1001 is cancelled (no tracing), and customer 42
-- is deleted: a tombstone (payload NULL) for key "42" of the Customer topic.
BEGIN;
INSERT INTO outboxevent (id, aggregatetype, aggregateid, type, payload, tracingspancontext)
VALUES ('9a1bd9f0-6c3e-4f8a-b2d4-1e5f7a9c0b31', 'Order', '1001', 'OrderLineUpdated',
        '{"orderId": 1001, "orderLineId": 2, "oldStatus": "ENTERED", "newStatus": "CANCELLED", "updatedAt": "2024-03-14T09:31:02"}',
        NULL);

INSERT INTO outboxevent (id, aggregatetype, aggregateid, type, payload, tracingspancontext)
VALUES ('c3e5a7b9-2d4f-4a6c-8e0a-b1c3d5e7f902', 'Customer', '42', 'CustomerDeleted', NULL, NULL);
COMMIT;

-- Transaction 3: the Quarkus extension with remove-after-insert=true (its
-- default): insert, then delete the same row, before commit.
BEGIN;
INSERT INTO outboxevent (id, aggregatetype, aggregateid, type, payload, tracingspancontext)
VALUES ('e8f0a2c4-6b8d-4e0f-9a1b-3c5d7e9f1a23', 'Order', '1002', 'OrderCreated',
        '{"id": 1002, "customerId": 7, "orderDate": "2024-03-14T09:40:12", "lineItems": [{"id": 3, "item": "Kafka Connect in Practice", "status": "ENTERED", "quantity": 1, "totalPrice": 44.50}]}',
        E'#Thu Mar 14 08:40:12 UTC 2024\ntraceparent=00-5b8aa5a2d2c872e8321cf37308d69df2-051581bf3cb55c13-01\n');
DELETE FROM outboxevent WHERE id = 'e8f0a2c4-6b8d-4e0f-9a1b-3c5d7e9f1a23';
COMMIT;
