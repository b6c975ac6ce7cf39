package e2e

import (
	"encoding/json"
	"maps"
	"os"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/outboxd/outboxd/internal/testenv/pgtest"
	"github.com/outboxd/outboxd/sink"
)

// The outbox tables other frameworks write, streamed and backfilled with
// a mapping alone. The DDL and rows are in testdata/frameworks (each file
// cites the framework's source); its README.md lists what each row must
// become, which the cases below hold outboxd to: every row's id, subject,
// body and headers.

// frameworkCase is one framework's table, its mapping, and its messages.
type frameworkCase struct {
	name        string
	fixture     string   // testdata/frameworks/<fixture>.sql
	publication string   // the tables of the publication
	mapping     []string // flags of run and backfill alike
	orderBy     string   // backfill --order-by; "" orders by id
	// bodies, when set, selects the exact expected bodies from the
	// table, in the order of want (long texts kept verbatim).
	bodies string
	want   []frameworkMessage
}

// frameworkMessage is what a row must become. Headers are the row's own,
// all headers but Nats-* and Outbox-*, plus the Outbox-* ones listed.
type frameworkMessage struct {
	id, subject string
	body        string // exact bytes; "" takes it from frameworkCase.bodies
	bodyJSON    bool   // compare the body as JSON (a JSON path re-encodes)
	headers     map[string]string
	notInTable  bool // deleted in its transaction: streamed, never backfilled
}

const (
	mtContentType = "application/vnd.masstransit+json"
	capOrderID    = "8d2c4f0e-6b1a-4c3e-9f57-2a9b1c7d4e10"
)

func frameworkCases() []frameworkCase {
	capHeaders := func(id, name, typ, sent string, extra map[string]string) map[string]string {
		h := map[string]string{"cap-msg-id": id, "cap-corr-id": id, "cap-corr-seq": "0", "cap-msg-name": name, "cap-msg-type": typ, "cap-senttime": sent,
			sink.HeaderEventType: name}
		maps.Copy(h, extra)
		return h
	}
	efType := func(typeName string) map[string]string { return map[string]string{sink.HeaderEventType: typeName} }
	return []frameworkCase{
		{
			name: "MassTransit", fixture: "masstransit", publication: `"OutboxMessage"`,
			mapping: []string{"--table", `"OutboxMessage"`,
				"--columns", "id=MessageId,payload=Body,headers=Headers,created_at=SentTime,header.Content-Type=ContentType",
				"--subject", "masstransit.{MessageType|first(;)|last(:)}"},
			orderBy: "SequenceNumber",
			bodies:  `SELECT "Body" FROM "OutboxMessage" ORDER BY "SequenceNumber"`,
			want: []frameworkMessage{
				{id: "6e0b0000-5d1e-0015-8a3c-08dc440a1f01", subject: "masstransit.OrderSubmitted", headers: map[string]string{
					"Content-Type": mtContentType, "MT-Activity-Id": "00-4bf92f3577b34da6a3ce929d0e0e4736-a3ce929d0e0e4736-01", "Tenant-Id": "acme"}},
				{id: "6e0b0000-5d1e-0015-8b91-08dc440a1f01", subject: "masstransit.PaymentRequested", headers: map[string]string{
					"Content-Type": mtContentType, "MT-Activity-Id": "00-4bf92f3577b34da6a3ce929d0e0e4736-5c1f2a9b0e3d4c7a-01", "Priority": "5", "Is-Retry": "false"}},
				{id: "6e0b0000-5d1e-0015-ff02-08dc440a9c52", subject: "masstransit.OrderShipped", headers: map[string]string{"Content-Type": mtContentType}},
			},
		},
		{
			name: "CAP", fixture: "cap", publication: `"cap"."published"`,
			mapping: []string{"--table", "cap.published", "--columns", "id=Id,event_type=Name,payload=Content->Value,headers=Content->Headers",
				"--subject", "cap.{Name|tokens}"},
			orderBy: "Id",
			want: []frameworkMessage{
				{id: "2857008912166129665", subject: "cap.shop.order.paid", bodyJSON: true,
					body:    `{"OrderId":"` + capOrderID + `","Amount":59.90,"Currency":"EUR","PaidAt":"2024-03-14T09:26:53.4127781+01:00","CustomerEmail":"anna+shop@example.com"}`,
					headers: capHeaders("2857008912166129665", "shop.order.paid", "OrderPaid", "03/14/2024 09:26:53", nil)},
				{id: "2857008912166129666", subject: "cap.shop.order.shipped", bodyJSON: true,
					body:    `{"OrderId":"` + capOrderID + `","Carrier":"DHL","TrackingNo":"JJD000390007817652"}`,
					headers: capHeaders("2857008912166129666", "shop.order.shipped", "<>f__AnonymousType0`3", "03/14/2024 09:31:02", nil)},
				{id: "2857008912166129667", subject: "cap.shop.invoice.issued", bodyJSON: true,
					body: `{"InvoiceNo":"RE-2024-00042","OrderId":"` + capOrderID + `","Customer":"Müller & Söhne GmbH","Total":59.90,"Lines":[{"Sku":"SKU-1","Qty":2},{"Sku":"SKU-7","Qty":1}]}`,
					headers: capHeaders("2857008912166129667", "shop.invoice.issued", "InvoiceIssued", "03/14/2024 09:31:02",
						map[string]string{"cap-callback-name": "shop.invoice.issued.ack"})},
			},
		},
		{
			name: "Debezium", fixture: "debezium", publication: "outboxevent",
			mapping: []string{"--table", "outboxevent",
				"--columns", "id=id,aggregate_type=aggregatetype,aggregate_id=aggregateid,event_type=type,payload=payload,headers=tracingspancontext",
				"--headers-format", "properties", "--null-payload", "empty", "--subject", "outbox.event.{aggregatetype}"},
			want: []frameworkMessage{
				{id: "4d47e190-0402-4048-bc2c-89dd54343cdc", subject: "outbox.event.Order",
					body:    `{"id": 1001, "lineItems": [{"id": 1, "item": "Debezium in Action", "status": "ENTERED", "quantity": 2, "totalPrice": 39.98}, {"id": 2, "item": "Debezium for Dummies", "status": "ENTERED", "quantity": 1, "totalPrice": 29.99}], "orderDate": "2024-03-14T09:26:53", "customerId": 42}`,
					headers: debeziumHeaders("Order", "1001", "OrderCreated", map[string]string{"traceparent": "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"})},
				{id: "9a1bd9f0-6c3e-4f8a-b2d4-1e5f7a9c0b31", subject: "outbox.event.Order",
					body:    `{"orderId": 1001, "newStatus": "CANCELLED", "oldStatus": "ENTERED", "updatedAt": "2024-03-14T09:31:02", "orderLineId": 2}`,
					headers: debeziumHeaders("Order", "1001", "OrderLineUpdated", nil)},
				{id: "c3e5a7b9-2d4f-4a6c-8e0a-b1c3d5e7f902", subject: "outbox.event.Customer", body: "",
					headers: debeziumHeaders("Customer", "42", "CustomerDeleted", map[string]string{sink.HeaderNullPayload: "true"})},
				{id: "e8f0a2c4-6b8d-4e0f-9a1b-3c5d7e9f1a23", subject: "outbox.event.Order", notInTable: true,
					body:    `{"id": 1002, "lineItems": [{"id": 3, "item": "Kafka Connect in Practice", "status": "ENTERED", "quantity": 1, "totalPrice": 44.50}], "orderDate": "2024-03-14T09:40:12", "customerId": 7}`,
					headers: debeziumHeaders("Order", "1002", "OrderCreated", map[string]string{"traceparent": "00-5b8aa5a2d2c872e8321cf37308d69df2-051581bf3cb55c13-01"})},
			},
		},
		{
			name: "EF Core", fixture: "efcore", publication: `"OutboxMessages"`,
			mapping: []string{"--table", `"OutboxMessages"`, "--columns", "id=Id,event_type=TypeName,payload=Content,created_at=CreatedAt",
				"--subject", "efcore.{TypeName|first(,)|last(.)|last(+)}"},
			orderBy: "CreatedAt",
			want: []frameworkMessage{
				{id: "3b1f6a2e-9c4d-4e8b-b7a1-5d2c9e0f4a61", subject: "efcore.OrderPaid",
					body:    `{"OrderId":"` + capOrderID + `","Amount":59.90,"Currency":"EUR","OccurredOn":"2024-03-14T08:26:53.4127781Z"}`,
					headers: efType("MyApp.Events.OrderPaid, MyApp")},
				{id: "a54c8e21-7f3b-4d9a-8c6e-0b2d4f6a8c13", subject: "efcore.OrderShipped",
					body:    `{"OrderId":"` + capOrderID + `","Carrier":"DHL","TrackingNumber":"JJD000390007817652","ShippedTo":"Caf\u00E9 Zentral, Wien"}`,
					headers: efType("MyApp.Events.OrderShipped, MyApp")},
				{id: "d7e9f1a3-5b7c-4d9e-a0f2-4c6e8a0b2d45", subject: "efcore.LoyaltyPointsAwarded",
					body:    `{"CustomerId":42,"Points":60,"Reason":"order 8d2c4f0e \u002B bonus"}`,
					headers: efType("MyApp.Events.Customers+LoyaltyPointsAwarded, MyApp")},
				{id: "f0a2c4e6-8a0c-4e2f-b4d6-8f0a2c4e6a87", subject: "efcore.InvoiceIssued",
					body:    `{"InvoiceNo":"RE-2024-00042","OrderId":"` + capOrderID + `","Total":59.90,"IssuedAt":"2024-03-14T08:35:40.0021894Z"}`,
					headers: efType("MyApp.Billing.Events.InvoiceIssued, MyApp.Billing, Version=1.0.0.0, Culture=neutral, PublicKeyToken=null")},
			},
		},
		{
			name: "Watermill", fixture: "watermill", publication: `"watermill_orders"`,
			mapping: []string{"--table", `"watermill_orders"`, "--columns", "id=uuid,payload=payload,headers=metadata", "--subject", "watermill.orders"},
			orderBy: `transaction_id, "offset"`,
			want: []frameworkMessage{
				{id: "9f1c2e7a-4b3d-4f6e-8a2b-1c3d5e7f9a0b", subject: "watermill.orders",
					body:    `{"order_id":"` + capOrderID + `","amount_cents":5990,"currency":"EUR","paid_at":"2024-03-14T09:26:53.412778+01:00"}`,
					headers: map[string]string{"name": "events.OrderPaid"}},
				{id: "2c7e9a41-5d3b-4f8e-9a6c-7b1d3f5a9e02", subject: "watermill.orders",
					body:    `{"order_id":"` + capOrderID + `","invoice_to":"Tom \u0026 Jerry Ltd"}`,
					headers: map[string]string{"correlation_id": "01HS0Q8J6ZK3V9X2B7M4N5P8RT", "name": "events.InvoiceRequested"}},
				{id: "5e8a1c3f-7b9d-4e2a-b6c8-0d2f4a6c8e13", subject: "watermill.orders",
					body: `{"order_id":"` + capOrderID + `","carrier":"DHL","tracking_no":"JJD000390007817652"}`, headers: map[string]string{}},
				{id: "b3d5f7a9-1c3e-4a5b-8d7f-9e1a3c5e7b24", subject: "watermill.orders",
					body: `{"order_id":"` + capOrderID + `","status":"delivered"}`, headers: map[string]string{"priority": "low"}},
			},
		},
	}
}

// debeziumHeaders are a Debezium row's headers: the mapped fields' and
// those of its trace context.
func debeziumHeaders(aggType, aggID, typ string, extra map[string]string) map[string]string {
	h := map[string]string{sink.HeaderAggregateType: aggType, sink.HeaderAggregateID: aggID, sink.HeaderEventType: typ}
	maps.Copy(h, extra)
	return h
}

// frameworkCaseOf is the case of a fixture.
func frameworkCaseOf(t *testing.T, fixture string) frameworkCase {
	t.Helper()
	for _, fc := range frameworkCases() {
		if fc.fixture == fixture {
			return fc
		}
	}
	t.Fatalf("no framework case for fixture %q", fixture)
	return frameworkCase{}
}

// newFrameworkEnv is an environment with fc's tables (its fixture's DDL)
// and a publication of inserts into them; it returns the fixture's rows,
// not yet written.
func newFrameworkEnv(t *testing.T, fc frameworkCase) (e *env, rows string) {
	t.Helper()
	e = newEnv(t, pgtest.Shared(t), false)
	ddl, rows := loadFixture(t, fc.fixture)
	e.pg.Exec(t, e.dsn, ddl)
	e.pg.Exec(t, e.dsn, "CREATE PUBLICATION outboxd FOR TABLE "+fc.publication+" WITH (publish = 'insert')")
	return e, rows
}

// loadFixture returns a fixture's DDL and its rows.
func loadFixture(t *testing.T, name string) (ddl, rows string) {
	t.Helper()
	b, err := os.ReadFile("testdata/frameworks/" + name + ".sql")
	if err != nil {
		t.Fatal(err)
	}
	ddl, rows, ok := strings.Cut(string(b), "\n-- @rows\n")
	if !ok {
		t.Fatalf("testdata/frameworks/%s.sql has no -- @rows line", name)
	}
	return ddl, rows
}

// TestFrameworkTablesStream: each framework's table streams by mapping
// alone, while its framework writes rows as it does: every row's id,
// subject, body and headers as testdata/frameworks/README.md says, in
// commit order.
func TestFrameworkTablesStream(t *testing.T) {
	for _, fc := range frameworkCases() {
		t.Run(fc.name, func(t *testing.T) {
			e, rows := newFrameworkEnv(t, fc)
			p := e.start(e.args(fc.mapping...)...)
			e.waitStreaming(p)
			e.pg.Exec(t, e.dsn, rows)
			e.checkFramework(fc, fc.want)
			p.stopCleanly()
		})
	}
}

// TestFrameworkTablesBackfill: the same tables backfilled (the rows are
// there before outboxd starts) give the same messages, in the order of
// the table's order column (by id without one); a row deleted in its own
// transaction is not in the table, so not backfilled.
func TestFrameworkTablesBackfill(t *testing.T) {
	for _, fc := range frameworkCases() {
		t.Run(fc.name, func(t *testing.T) {
			e, rows := newFrameworkEnv(t, fc)
			e.pg.Exec(t, e.dsn, rows)
			want := slices.DeleteFunc(slices.Clone(fc.want), func(m frameworkMessage) bool { return m.notInTable })
			args := append(slices.Clone(fc.mapping), "--create-stream", "--where", "true")
			if fc.orderBy != "" {
				args = append(args, "--order-by", fc.orderBy)
			} else {
				slices.SortFunc(want, func(a, b frameworkMessage) int { return strings.Compare(a.id, b.id) })
			}
			e.runOK(e.backfillArgs(args...)...)
			e.checkFramework(fc, want)
		})
	}
}

// checkFramework reads the stream and holds each message to want.
func (e *env) checkFramework(fc frameworkCase, want []frameworkMessage) {
	e.t.Helper()
	var bodies []string
	if fc.bodies != "" {
		conn := e.connect()
		rows, err := conn.Query(e.t.Context(), fc.bodies)
		if err != nil {
			e.t.Fatal(err)
		}
		for rows.Next() {
			var b string
			if err := rows.Scan(&b); err != nil {
				e.t.Fatal(err)
			}
			bodies = append(bodies, b)
		}
		if rows.Err() != nil || len(bodies) != len(fc.want) {
			e.t.Fatalf("%s: %d bodies (%v), want %d", fc.bodies, len(bodies), rows.Err(), len(fc.want))
		}
	}
	msgs := e.readStream(e.js(), len(want), time.Minute)
	if len(msgs) != len(want) {
		e.t.Fatalf("stream holds %d messages, want %d", len(msgs), len(want))
	}
	for i, m := range msgs {
		w := want[i]
		if w.body == "" && bodies != nil {
			w.body = bodies[slices.IndexFunc(fc.want, func(o frameworkMessage) bool { return o.id == w.id })]
		}
		if got := m.Header.Get(jetstream.MsgIDHeader); got != w.id {
			e.t.Errorf("message %d: Nats-Msg-Id %q, want %q", i, got, w.id)
			continue
		}
		if m.Subject != w.subject {
			e.t.Errorf("message %s: subject %q, want %q", w.id, m.Subject, w.subject)
		}
		if !sameBody(m.Data, w.body, w.bodyJSON) {
			e.t.Errorf("message %s: body\n%s\nwant\n%s", w.id, m.Data, w.body)
		}
		if got := rowHeaders(m.Header, w.headers); !maps.Equal(got, w.headers) {
			e.t.Errorf("message %s: headers %v, want %v", w.id, got, w.headers)
		}
	}
}

// sameBody compares a body with what a row must give: exact bytes, or
// equal JSON values.
func sameBody(got []byte, want string, asJSON bool) bool {
	if !asJSON {
		return string(got) == want
	}
	var g, w any
	if json.Unmarshal(got, &g) != nil || json.Unmarshal([]byte(want), &w) != nil {
		return false
	}
	return reflect.DeepEqual(g, w)
}

// rowHeaders are a message's headers that come from its row: all but
// Nats-* and Outbox-*, plus those Outbox-* ones want names. A header with
// several values shows them joined, so that a repeat is seen.
func rowHeaders(h nats.Header, want map[string]string) map[string]string {
	out := map[string]string{}
	for k, vs := range h {
		_, wanted := want[k]
		if !wanted && (strings.HasPrefix(k, "Nats-") || strings.HasPrefix(k, "Outbox-")) {
			continue
		}
		out[k] = strings.Join(vs, "|")
	}
	return out
}

// TestDebeziumTombstones: Debezium's NULL payload (a tombstone) under the
// other two --null-payload policies. stop, the default: outboxd stops at
// the row with an error naming its id, the column and the fix, and
// confirms nothing past it, so a restart with a policy publishes it.
// skip: the row is left out, with a log line naming it.
func TestDebeziumTombstones(t *testing.T) {
	debezium := frameworkCaseOf(t, "debezium")
	const tombstone = "c3e5a7b9-2d4f-4a6c-8e0a-b1c3d5e7f902"
	withPolicy := func(policy string) []string {
		args := slices.Clone(debezium.mapping)
		args[slices.Index(args, "--null-payload")+1] = policy
		return args
	}
	e, rows := newFrameworkEnv(t, debezium)

	p := e.start(e.args(withPolicy("stop")...)...)
	e.waitStreaming(p)
	e.pg.Exec(t, e.dsn, rows)
	if code := p.wait(time.Minute); code == 0 {
		t.Fatalf("outboxd exited 0 at a NULL payload under --null-payload stop")
	}
	out := p.output.String()
	for _, want := range []string{`id "` + tombstone + `"`, `column "payload"`, "--null-payload skip", "--null-payload empty", "Debezium"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, tail(out, 20))
		}
	}

	p = e.start(e.args(withPolicy("skip")...)...)
	want := slices.DeleteFunc(slices.Clone(debezium.want), func(m frameworkMessage) bool { return m.id == tombstone })
	e.checkFramework(debezium, want)
	p.stopCleanly()
	if out := p.output.String(); !strings.Contains(out, "row with a NULL payload not published (--null-payload skip)") || !strings.Contains(out, tombstone) {
		t.Errorf("skip: no log line naming the skipped row %s:\n%s", tombstone, tail(out, 20))
	}
}

// TestFrameworkBadRows: rows of a framework table that the mapping cannot
// read. Under --dead-letter each goes there with its whole column as the
// body and a reason naming the row id, the column and the fix, between
// the good rows; without it outboxd stops at the first with that error,
// and a restart with --dead-letter publishes everything from there, so
// nothing is lost. Settings a table cannot satisfy stop outboxd at start.
func TestFrameworkBadRows(t *testing.T) {
	const (
		insert     = `INSERT INTO "cap"."published" VALUES ($1, 'v1', 'shop.order.paid', $2, 0, localtimestamp, NULL, 'Scheduled')`
		deadLetter = "cap.dead-letter"
	)
	capCase := frameworkCaseOf(t, "cap")
	rows := []struct {
		id, content string
		reason      []string // "" for a good row
	}{
		{id: "1", content: `{"Headers":{"cap-msg-id":"1"},"Value":{"n":1}}`},
		{id: "2", content: `{"Headers":{},"value":{"n":2}}`,
			reason: []string{`does not match the JSON path ->Value: there is no key "Value" (the object has keys "Headers", "value")`, "fix the path in --columns"}},
		{id: "3", content: `{"Headers":{"cap-msg-id":"3","retry":{"count":2}},"Value":{"n":3}}`,
			reason: []string{`has header "retry" whose value is a JSON object`, "--columns headers=Content->Headers->retry"}},
		{id: "4", content: `Value=4`, reason: []string{"is not valid JSON, so the JSON path ->Value cannot be read"}},
		{id: "5", content: `{"Headers":{"cap-msg-id":"5"},"Value":{"n":5}}`},
	}
	setUpTable := func(t *testing.T) *env {
		e, _ := newFrameworkEnv(t, capCase)
		return e
	}
	insertRows := func(e *env) {
		conn := e.connect()
		for _, r := range rows {
			if _, err := conn.Exec(t.Context(), insert, r.id, r.content); err != nil {
				t.Fatal(err)
			}
		}
	}
	checkAll := func(t *testing.T, e *env) {
		msgs := e.readStream(e.js(), len(rows), time.Minute)
		if len(msgs) != len(rows) {
			t.Fatalf("stream holds %d messages, want %d", len(msgs), len(rows))
		}
		for i, m := range msgs {
			r := rows[i]
			if r.reason == nil {
				if m.Subject != "cap.shop.order.paid" || m.Header.Get(jetstream.MsgIDHeader) != r.id {
					t.Errorf("message %d: %s %q, want row %s on cap.shop.order.paid", i, m.Subject, m.Header.Get(jetstream.MsgIDHeader), r.id)
				}
				continue
			}
			reason := m.Header.Get("Outbox-Dead-Letter-Reason")
			if m.Subject != deadLetter || m.Header.Get("Outbox-Id") != r.id || string(m.Data) != r.content {
				t.Errorf("message %d: %s, Outbox-Id %q, body %q; want row %s's dead letter with its whole Content", i, m.Subject, m.Header.Get("Outbox-Id"), m.Data, r.id)
			}
			for _, w := range append([]string{`id "` + r.id + `"`, `column "Content"`}, r.reason...) {
				if !strings.Contains(reason, w) {
					t.Errorf("row %s: dead-letter reason lacks %q: %s", r.id, w, reason)
				}
			}
		}
	}

	t.Run("dead letter", func(t *testing.T) {
		e := setUpTable(t)
		p := e.start(e.args(append(slices.Clone(capCase.mapping), "--dead-letter", deadLetter)...)...)
		e.waitStreaming(p)
		insertRows(e)
		checkAll(t, e)
		p.stopCleanly()
	})

	t.Run("stop, then restart with a dead letter", func(t *testing.T) {
		e := setUpTable(t)
		p := e.start(e.args(capCase.mapping...)...)
		e.waitStreaming(p)
		insertRows(e)
		if code := p.wait(time.Minute); code != 1 {
			t.Fatalf("outboxd exited %d at a row it cannot read, want 1", code)
		}
		for _, w := range append([]string{`id "2"`, `column "Content"`, "--dead-letter"}, rows[1].reason...) {
			if !strings.Contains(p.output.String(), w) {
				t.Errorf("output lacks %q:\n%s", w, tail(p.output.String(), 20))
			}
		}
		p = e.start(e.args(append(slices.Clone(capCase.mapping), "--dead-letter", deadLetter)...)...)
		checkAll(t, e)
		p.stopCleanly()
	})

	t.Run("settings the table cannot satisfy", func(t *testing.T) {
		for _, tt := range []struct {
			name string
			args []string
			want []string
		}{
			{"unknown transform", []string{"--subject", "cap.{Name|tokenz}"},
				[]string{`--subject: subject template "cap.{Name|tokenz}"`, `placeholder {Name|tokenz}: unknown transform "tokenz"`, "the transforms are last(SEP), first(SEP), safe, lower and tokens"}},
			{"header of no column", []string{"--columns", "id=Id,payload=Content->Value,header.Content-Type=ContentType"},
				[]string{`column "ContentType" does not exist (header Content-Type is mapped to it)`, `"Id", "Version", "Name", "Content"`}},
			{"properties without a headers column", []string{"--columns", "id=Id,payload=Content->Value", "--headers-format", "properties"},
				[]string{"--headers-format", "reads the headers column, which is not mapped"}},
		} {
			t.Run(tt.name, func(t *testing.T) {
				e := setUpTable(t)
				args := slices.Clone(capCase.mapping)
				for i := 0; i < len(tt.args); i += 2 {
					if j := slices.Index(args, tt.args[i]); j >= 0 {
						args[j+1] = tt.args[i+1]
					} else {
						args = append(args, tt.args[i:i+2]...)
					}
				}
				e.expectExit(e.args(args...), tt.want...)
			})
		}
	})
}
