-- A hand-written EF Core outbox on PostgreSQL (EF Core 8 + Npgsql 8), the common
-- "domain events to OutboxMessages" pattern:
--
--   public class OutboxMessage {
--       public Guid Id { get; set; }
--       public string TypeName { get; set; }
--       public string Content { get; set; }
--       public DateTime CreatedAt { get; set; }
--       public DateTime? ProcessedAt { get; set; }
--   }
--   public DbSet<OutboxMessage> OutboxMessages { get; set; }
--
-- The DDL is what `dotnet ef migrations script` generates for that class by
-- convention (no configuration), with nullable reference types enabled (the
-- default of every .NET 6+ project template).
--
-- Sources (public, read through the search index):
--   EF Core conventions: table named after the DbSet property ("OutboxMessages");
--     a property named Id is the key, constraint "PK_<table>"; a Guid key gets
--     client-side values (no database default); columns in declaration order, key
--     first; with nullable reference types enabled, `string` is required (NOT NULL)
--     and `string?` optional (learn.microsoft.com/ef/core/miscellaneous/nullable-reference-types).
--   Npgsql EF Core provider 6.0 release notes (npgsql.org/efcore/release-notes/6.0.html):
--     DateTime maps to "timestamp with time zone" and must be written with
--     Kind=Utc; Guid -> uuid; string without max length -> text.
--   Npgsql's migrations SQL as committed in public projects (found by string search;
--     the index does not name their repositories), e.g. a table with
--     "Id" uuid NOT NULL, "Topic" text NOT NULL, "Content" text NOT NULL,
--     "OccuredAt" timestamp with time zone NOT NULL, "ProcessedAt" timestamp with
--     time zone, CONSTRAINT "PK_OutboxMessages" PRIMARY KEY ("Id"): nullable
--     columns carry no NULL keyword, exactly as below.
--
-- How applications fill a row (this is application code, not a framework, so
-- these are the usual choices, not a specification):
--   Id          Guid.NewGuid() (random, version 4): the message id.
--   TypeName    the event's .NET type for deserialization: either the short form
--               "<Namespace>.<Type>, <Assembly>" that Type.GetType accepts, or
--               Type.AssemblyQualifiedName ("..., Version=1.0.0.0, Culture=neutral,
--               PublicKeyToken=null"); nested types use '+' ("Outer+Inner").
--               Dots, commas, spaces, '=' and '+': never a single subject token.
--   Content     JsonSerializer.Serialize(evt, evt.GetType()) with default options:
--               compact, PascalCase, non-ASCII and + < > & ' escaped as \uXXXX.
--   CreatedAt   DateTime.UtcNow when the event is raised.
--   ProcessedAt NULL; the application's own polling relay sets it after sending
--               (an UPDATE, not a new message).

CREATE TABLE "OutboxMessages" (
    "Id" uuid NOT NULL,
    "TypeName" text NOT NULL,
    "Content" text NOT NULL,
    "CreatedAt" timestamp with time zone NOT NULL,
    "ProcessedAt" timestamp with time zone,
    CONSTRAINT "PK_OutboxMessages" PRIMARY KEY ("Id")
);

-- @rows
-- Example rows, one SaveChanges per transaction. The values are made up for
-- these tests.

-- Transaction 1: an order is paid.
BEGIN;
INSERT INTO "OutboxMessages" ("Id", "TypeName", "Content", "CreatedAt", "ProcessedAt")
VALUES ('3b1f6a2e-9c4d-4e8b-b7a1-5d2c9e0f4a61', 'MyApp.Events.OrderPaid, MyApp',
        '{"OrderId":"8d2c4f0e-6b1a-4c3e-9f57-2a9b1c7d4e10","Amount":59.90,"Currency":"EUR","OccurredOn":"2024-03-14T08:26:53.4127781Z"}',
        '2024-03-14 08:26:53.412778+00', NULL);
COMMIT;

-- Transaction 2: one SaveChanges stores two domain events; the second is a
-- nested type ('+').
BEGIN;
INSERT INTO "OutboxMessages" ("Id", "TypeName", "Content", "CreatedAt", "ProcessedAt")
VALUES ('a54c8e21-7f3b-4d9a-8c6e-0b2d4f6a8c13', 'MyApp.Events.OrderShipped, MyApp',
        '{"OrderId":"8d2c4f0e-6b1a-4c3e-9f57-2a9b1c7d4e10","Carrier":"DHL","TrackingNumber":"JJD000390007817652","ShippedTo":"Caf\u00E9 Zentral, Wien"}',
        '2024-03-14 08:31:02.118804+00', NULL);

INSERT INTO "OutboxMessages" ("Id", "TypeName", "Content", "CreatedAt", "ProcessedAt")
VALUES ('d7e9f1a3-5b7c-4d9e-a0f2-4c6e8a0b2d45', 'MyApp.Events.Customers+LoyaltyPointsAwarded, MyApp',
        '{"CustomerId":42,"Points":60,"Reason":"order 8d2c4f0e \u002B bonus"}',
        '2024-03-14 08:31:02.119377+00', NULL);
COMMIT;

-- Transaction 3: another service writes Type.AssemblyQualifiedName.
BEGIN;
INSERT INTO "OutboxMessages" ("Id", "TypeName", "Content", "CreatedAt", "ProcessedAt")
VALUES ('f0a2c4e6-8a0c-4e2f-b4d6-8f0a2c4e6a87', 'MyApp.Billing.Events.InvoiceIssued, MyApp.Billing, Version=1.0.0.0, Culture=neutral, PublicKeyToken=null',
        '{"InvoiceNo":"RE-2024-00042","OrderId":"8d2c4f0e-6b1a-4c3e-9f57-2a9b1c7d4e10","Total":59.90,"IssuedAt":"2024-03-14T08:35:40.0021894Z"}',
        '2024-03-14 08:35:40.002189+00', NULL);
COMMIT;
