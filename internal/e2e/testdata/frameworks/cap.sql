-- DotNetCore.CAP with PostgreSQL storage: the "cap" schema's "published" table
-- (and "received", which the same initializer creates) exactly as CAP creates
-- them at start-up, and rows as ICapPublisher writes them.
--
-- Sources (public source read through the search index):
--   dotnetcore/CAP
--     src/DotNetCore.CAP.PostgreSql/IStorageInitializer.PostgreSql.cs
--       @ 3c30059310a282e0b852b49c4b5263d21f98512a   (CreateDbTablesScript: the DDL below;
--                                                     table names "\"{Schema}\".\"published\"")
--     src/DotNetCore.CAP.PostgreSql/IDataStorage.PostgreSql.cs
--       @ 432500f1bc5ccd3a02ac464038d9e37aa66a0ec4   (StoreMessage: the INSERT, Added = DateTime.Now,
--                                                     StatusName 'Scheduled', Version, Id = cap-msg-id)
--     src/DotNetCore.CAP/Internal/ICapPublisher.Default.cs
--       @ d59985661c38b097f310807b976bd644c8a8b963, and the CAP 7/8 version with
--       PublishDelay (index copy, commit not shown)    (the headers a publish adds)
--     src/DotNetCore.CAP/Messages/Headers.cs @ 6a8ad3225f1e3bf7857a6572e833bb7fcdc9e5ef (header names)
--     src/DotNetCore.CAP/Messages/Message.cs @ 6a8ad3225f1e3bf7857a6572e833bb7fcdc9e5ef ({Headers, Value})
--     src/DotNetCore.CAP/Serialization/ISerializer.JsonUtf8.cs
--       @ 1972145c0bfa3245af45f7397529631de39bb3e5   (Content = JsonSerializer.Serialize(Message, CapOptions.JsonSerializerOptions))
--     src/DotNetCore.CAP/Internal/SnowflakeId.cs @ 1fa8d4cc1708823ba1eacc1c4df80d581b9fd691 (the id)
--     src/DotNetCore.CAP/CAP.Options.cs (CAP 8, index copy)  (Version "v1"; JsonSerializerOptions = new())
--   docs/content/user-guide/en/storage/postgresql.md: PostgreSqlOptions.Schema defaults to "cap".
--
-- How CAP fills a row (Publish/PublishAsync, inside the caller's transaction when
-- one was begun with BeginTransaction(capBus)):
--   Id          a 64-bit snowflake id (10-bit worker id from the MAC or CAP_WORKERID,
--               41-bit milliseconds since 2010-11-04, 12-bit sequence); the same
--               number, as decimal text, is the "cap-msg-id" header. The time part
--               is the generator's start time plus one per id (4096 per ms), so one
--               process's ids are consecutive: not a wall-clock time of the row.
--   Version     CapOptions.Version, "v1" by default.
--   Name        the topic name given to Publish, e.g. "shop.order.paid" (with
--               CapOptions.TopicNamePrefix, "<prefix>.<name>").
--   Content     the whole CAP message serialized with System.Text.Json and CAP's
--               default options (PascalCase, compact, the default encoder that
--               escapes non-ASCII and HTML-sensitive characters such as + < > & `):
--               {"Headers":{...},"Value":<the published object>}. Headers are all
--               strings or null, in insertion order: cap-callback-name (null unless
--               a callback name was given), cap-msg-id, cap-corr-id (= the message
--               id), cap-corr-seq ("0"), cap-msg-name (= Name), cap-msg-type
--               (typeof(T).Name: the short CLR name, "<>f__AnonymousType0`3" for an
--               anonymous object), cap-senttime (CAP 7/8: DateTime.Now.ToString(),
--               culture-dependent local time without offset; CAP <= 6 used
--               DateTimeOffset.Now.ToString(), which ends in "+01:00", escaped as
--               "\u002B01:00"); custom headers passed to Publish come first.
--   Retries     0.    Added  DateTime.Now: LOCAL wall-clock time of the publishing
--   host, in a timestamp WITHOUT time zone.   ExpiresAt  NULL.   StatusName 'Scheduled'
--   (CAP's own dispatcher later UPDATEs StatusName to 'Succeeded' and sets ExpiresAt).
-- The example rows below come from a host in Europe/Berlin (UTC+1 in March) with
-- invariant culture, as in .NET containers with globalization-invariant mode.

CREATE SCHEMA IF NOT EXISTS "cap";

CREATE TABLE IF NOT EXISTS "cap"."received"(
	"Id" BIGINT PRIMARY KEY NOT NULL,
    "Version" VARCHAR(20) NOT NULL,
	"Name" VARCHAR(200) NOT NULL,
	"Group" VARCHAR(200) NULL,
	"Content" TEXT NULL,
	"Retries" INT NOT NULL,
	"Added" TIMESTAMP NOT NULL,
    "ExpiresAt" TIMESTAMP NULL,
	"StatusName" VARCHAR(50) NOT NULL
);

CREATE TABLE IF NOT EXISTS "cap"."published"(
	"Id" BIGINT PRIMARY KEY NOT NULL,
    "Version" VARCHAR(20) NOT NULL,
	"Name" VARCHAR(200) NOT NULL,
	"Content" TEXT NULL,
	"Retries" INT NOT NULL,
	"Added" TIMESTAMP NOT NULL,
    "ExpiresAt" TIMESTAMP NULL,
	"StatusName" VARCHAR(50) NOT NULL
);

-- @rows
-- Example rows, with the column list and value order of CAP's INSERT. The values
-- are made up for these tests; their shape follows the sources above.

-- Transaction 1: the order service pays an order and publishes "shop.order.paid".
BEGIN;
INSERT INTO "cap"."published" ("Id","Version","Name","Content","Retries","Added","ExpiresAt","StatusName")
VALUES (2857008912166129665, 'v1', 'shop.order.paid', '{"Headers":{"cap-callback-name":null,"cap-msg-id":"2857008912166129665","cap-corr-id":"2857008912166129665","cap-corr-seq":"0","cap-msg-name":"shop.order.paid","cap-msg-type":"OrderPaid","cap-senttime":"03/14/2024 09:26:53"},"Value":{"OrderId":"8d2c4f0e-6b1a-4c3e-9f57-2a9b1c7d4e10","Amount":59.90,"Currency":"EUR","PaidAt":"2024-03-14T09:26:53.4127781+01:00","CustomerEmail":"anna\u002Bshop@example.com"}}', 0, '2024-03-14 09:26:53.414512', NULL, 'Scheduled');
COMMIT;

-- Transaction 2: two publishes in one CAP transaction: an anonymous object to
-- "shop.order.shipped", then "shop.invoice.issued" with a callback name.
BEGIN;
INSERT INTO "cap"."published" ("Id","Version","Name","Content","Retries","Added","ExpiresAt","StatusName")
VALUES (2857008912166129666, 'v1', 'shop.order.shipped', '{"Headers":{"cap-callback-name":null,"cap-msg-id":"2857008912166129666","cap-corr-id":"2857008912166129666","cap-corr-seq":"0","cap-msg-name":"shop.order.shipped","cap-msg-type":"\u003C\u003Ef__AnonymousType0\u00603","cap-senttime":"03/14/2024 09:31:02"},"Value":{"OrderId":"8d2c4f0e-6b1a-4c3e-9f57-2a9b1c7d4e10","Carrier":"DHL","TrackingNo":"JJD000390007817652"}}', 0, '2024-03-14 09:31:02.118804', NULL, 'Scheduled');

INSERT INTO "cap"."published" ("Id","Version","Name","Content","Retries","Added","ExpiresAt","StatusName")
VALUES (2857008912166129667, 'v1', 'shop.invoice.issued', '{"Headers":{"cap-callback-name":"shop.invoice.issued.ack","cap-msg-id":"2857008912166129667","cap-corr-id":"2857008912166129667","cap-corr-seq":"0","cap-msg-name":"shop.invoice.issued","cap-msg-type":"InvoiceIssued","cap-senttime":"03/14/2024 09:31:02"},"Value":{"InvoiceNo":"RE-2024-00042","OrderId":"8d2c4f0e-6b1a-4c3e-9f57-2a9b1c7d4e10","Customer":"M\u00FCller \u0026 S\u00F6hne GmbH","Total":59.90,"Lines":[{"Sku":"SKU-1","Qty":2},{"Sku":"SKU-7","Qty":1}]}}', 0, '2024-03-14 09:31:02.121377', NULL, 'Scheduled');
COMMIT;
