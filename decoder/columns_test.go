package decoder

import (
	"errors"
	"fmt"
	"reflect"
	"strconv"
	"strings"
	"testing"
)

func TestParseColumns(t *testing.T) {
	tests := []struct {
		name    string
		in      string
		want    Columns
		wantErr string
	}{
		{
			name: "OutboxMessage",
			in:   "id=Id,aggregate_type=AggregateType,event_type=Topic,payload=Payload,created_at=CreatedAt",
			want: Columns{ID: "Id", AggregateType: "AggregateType", EventType: "Topic", Payload: "Payload", CreatedAt: "CreatedAt"},
		},
		{
			name: "OutboxMessages with spaces",
			in:   " id = Id , event_type = TypeName , payload = Content ",
			want: Columns{ID: "Id", EventType: "TypeName", Payload: "Content"},
		},
		{name: "names are not folded", in: "id=ID,payload=PayLoad", want: Columns{ID: "ID", Payload: "PayLoad"}},
		{
			name: "quoted names",
			in:   `id="Event Id",payload="a,b=""c"""`,
			want: Columns{ID: "Event Id", Payload: `a,b="c"`},
		},
		{name: "one column feeds two fields", in: "id=Id,aggregate_id=Id,payload=p", want: Columns{ID: "Id", AggregateID: "Id", Payload: "p"}},
		{name: "default mapping", in: DefaultColumns().String(), want: DefaultColumns()},
		{
			name: "CAP's Content wrapper",
			in:   "id=Id,event_type=Name,payload=Content->Value,headers=Content->Headers",
			want: Columns{ID: "Id", EventType: "Name", Payload: "Content", Headers: "Content", PayloadPath: jsonPath("Value"), HeadersPath: jsonPath("Headers")},
		},
		{name: "quoted column with a path", in: `id=Id,payload="Content"->Value`, want: Columns{ID: "Id", Payload: "Content", PayloadPath: jsonPath("Value")}},
		{name: "spaces around the arrow", in: "id=Id, payload = Content -> Value -> Inner ", want: Columns{ID: "Id", Payload: "Content", PayloadPath: jsonPath("Value", "Inner")}},
		{
			name: "quoted keys",
			in:   `id=Id,payload=C->"a,b"->'it''s'->"->"->''->"say ""hi"""`,
			want: Columns{ID: "Id", Payload: "C", PayloadPath: jsonPath("a,b", "it's", "->", "", `say "hi"`)},
		},
		{name: "a key of digits is a key", in: "id=Id,headers=H->0,payload=P", want: Columns{ID: "Id", Headers: "H", Payload: "P", HeadersPath: jsonPath("0")}},
		{name: "column name with an arrow, quoted", in: `id=Id,payload="a->b"`, want: Columns{ID: "Id", Payload: "a->b"}},
		{
			name: "MassTransit: a header from a column",
			in:   "id=MessageId,payload=Body,headers=Headers,header.Content-Type=ContentType",
			want: Columns{ID: "MessageId", Payload: "Body", Headers: "Headers", HeaderColumns: []HeaderColumn{{Name: "Content-Type", Column: "ContentType"}}},
		},
		{
			name: "two header columns, one quoted",
			in:   `id=Id,header.tenant=Tenant,payload=P,header.Conversation-Id="Conversation,Id"`,
			want: Columns{ID: "Id", Payload: "P", HeaderColumns: []HeaderColumn{{Name: "tenant", Column: "Tenant"}, {Name: "Conversation-Id", Column: "Conversation,Id"}}},
		},

		{name: "header name not a NATS header name", in: "id=Id,payload=P,header.Content Type=C", wantErr: `header.Content Type=C: header "Content Type", which is not a valid NATS header name`},
		{name: "header name with a colon", in: "id=Id,payload=P,header.a:b=C", wantErr: `which is not a valid NATS header name`},
		{name: "empty header name", in: "id=Id,payload=P,header.=C", wantErr: `header "", which is not a valid NATS header name`},
		{name: "Nats- header", in: "id=Id,payload=P,header.Nats-Msg-Id=C", wantErr: "headers starting with Nats- are set by JetStream and outboxd, not by a column: choose another name"},
		{name: "Outbox- header, any case", in: "id=Id,payload=P,header.outbox-lsn=C", wantErr: "headers starting with Outbox- are set by JetStream and outboxd"},
		{name: "header mapped twice", in: "id=Id,payload=P,header.a=B,header.a=C", wantErr: `header a is mapped twice (to "B" and "C"): map each header once`},
		{name: "path on a header column", in: "id=Id,payload=P,header.a=C->k", wantErr: "header.a=C->k: a JSON path (->) is supported for payload and headers only"},

		{name: "empty key", in: "id=Id,payload=Content->", wantErr: "field payload: empty JSON path key: name the key after ->, e.g. payload=Content->Value"},
		{name: "empty key before a comma", in: "id=Id,payload=Content->,headers=H", wantErr: "field payload: empty JSON path key"},
		{name: "double arrow", in: "id=Id,payload=Content->>Value", wantErr: "field payload: ->> is not a JSON path step here: use ->"},
		{name: "path on id", in: "id=Content->Id,payload=P", wantErr: "field id=Content->Id: a JSON path (->) is supported for payload and headers only: map this field to a column"},
		{name: "path on event_type", in: "id=Id,event_type=Content->Headers->name,payload=P", wantErr: "field event_type=Content->Headers->name: a JSON path (->) is supported for payload and headers only"},
		{name: "unterminated single quote", in: "id=Id,payload=Content->'Value", wantErr: "field payload: unterminated quoted JSON path key"},
		{name: "junk after a quoted key", in: `id=Id,payload=Content->"Value"x`, wantErr: `unexpected 'x' after the quoted name`},
		{name: "key holding a quote", in: `id=Id,payload=Content->Va"lue`, wantErr: `JSON path key "Va\"lue" holds '=' or '"'`},
		{name: "key holding a NUL", in: "id=Id,payload=Content->\"a\x00b\"", wantErr: "JSON path key \"a\\x00b\" holds a NUL character"},

		{name: "empty", in: "", wantErr: "is empty"},
		{name: "unknown field", in: "id=Id,evnt_type=Topic,payload=P", wantErr: `unknown field "evnt_type": use id, aggregate_type, aggregate_id, event_type, payload, headers, created_at, or header.NAME for a header from a column`},
		{name: "field case matters", in: "ID=Id,payload=P", wantErr: `unknown field "ID"`},
		{name: "id missing", in: "event_type=Topic,payload=P", wantErr: "field id is not mapped: every event needs one (id and payload are required), e.g. id=id"},
		{name: "payload missing", in: "id=Id,event_type=Topic", wantErr: "field payload is not mapped"},
		{name: "duplicate field", in: "id=Id,payload=P,id=Other", wantErr: `field id is mapped twice (to "Id" and "Other")`},
		{name: "no equals", in: "id=Id,payload", wantErr: `"payload" is not field=column`},
		{name: "empty column", in: "id=,payload=P", wantErr: "field id: empty column name"},
		{name: "empty field", in: "=Id,payload=P", wantErr: "has no field name"},
		{name: "trailing comma", in: "id=Id,payload=P,", wantErr: "trailing comma"},
		{name: "missing comma", in: "id=Id payload=P", wantErr: `holds '=' or '"'`},
		{name: "unterminated quote", in: `id="Id,payload=P`, wantErr: "unterminated quoted column name"},
		{name: "junk after quote", in: `id="Id"x,payload=P`, wantErr: `unexpected 'x' after the quoted name`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseColumns(tt.in)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("ParseColumns(%q) error = %v, want it to contain %q", tt.in, err, tt.wantErr)
				}
				if !strings.Contains(err.Error(), strconv.Quote(tt.in)) {
					t.Errorf("error %q does not quote the input", err)
				}
				return
			}
			if err != nil || !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("ParseColumns(%q) = %+v, %v; want %+v", tt.in, got, err, tt.want)
			}
			again, err := ParseColumns(got.String())
			if err != nil || !reflect.DeepEqual(again, got) {
				t.Fatalf("ParseColumns(String()) = %+v, %v; want %+v (String %q)", again, err, got, got.String())
			}
		})
	}
}

func TestColumnsCheckTable(t *testing.T) {
	outboxMessage := []TableColumn{
		{Name: "Id", Type: oidUUID}, {Name: "AggregateType", Type: oidText}, {Name: "Topic", Type: oidText},
		{Name: "Payload", Type: oidText}, {Name: "CreatedAt", Type: oidTimestamptz}, {Name: "Status", Type: 23},
	}
	mapping := Columns{ID: "Id", AggregateType: "AggregateType", EventType: "Topic", Payload: "Payload", CreatedAt: "CreatedAt"}
	tests := []struct {
		name    string
		cols    Columns
		table   []TableColumn
		wantErr string
	}{
		{name: "fits", cols: mapping, table: outboxMessage},
		{name: "bytea payload", cols: Columns{ID: "Id", Payload: "Body"}, table: []TableColumn{{Name: "Id", Type: oidText}, {Name: "Body", Type: oidBytea}}},
		{name: "missing column lists the table's", cols: Columns{ID: "Id", Payload: "payload"}, table: outboxMessage,
			wantErr: `column "payload" does not exist (field payload is mapped to it); the table has "Id", "AggregateType", "Topic", "Payload", "CreatedAt", "Status"`},
		{name: "wrong type", cols: Columns{ID: "Id", EventType: "Status", Payload: "Payload"}, table: outboxMessage,
			wantErr: `column "Status" has type integer, but field event_type accepts text or varchar`},
		{name: "integer id", cols: Columns{ID: "Status", Payload: "Payload"}, table: outboxMessage},
		{name: "bigint id", cols: Columns{ID: "Seq", Payload: "Payload"}, table: []TableColumn{{Name: "Seq", Type: oidInt8}, {Name: "Payload", Type: oidText}}},
		{name: "smallint id", cols: Columns{ID: "Seq", Payload: "Payload"}, table: []TableColumn{{Name: "Seq", Type: oidInt2}, {Name: "Payload", Type: oidText}}},
		{name: "timestamp id", cols: Columns{ID: "CreatedAt", Payload: "Payload"}, table: outboxMessage,
			wantErr: `column "CreatedAt" has type timestamptz, but field id accepts uuid, text, varchar, smallint, integer or bigint`},
		{name: "text headers", cols: Columns{ID: "Id", Payload: "Payload", Headers: "Topic"}, table: outboxMessage},
		{name: "integer headers", cols: Columns{ID: "Id", Payload: "Payload", Headers: "Status"}, table: outboxMessage,
			wantErr: `column "Status" has type integer, but field headers accepts jsonb, json, text or varchar`},
		{name: "paths into a text column", cols: withPaths(Columns{ID: "Id", Payload: "Payload", Headers: "Payload"}, "Value", "Headers"), table: outboxMessage},
		{name: "path into a bytea column", cols: withPaths(Columns{ID: "Id", Payload: "Body"}, "Value", ""),
			table:   []TableColumn{{Name: "Id", Type: oidText}, {Name: "Body", Type: oidBytea}},
			wantErr: `column "Body" has type bytea, but field payload with the JSON path ->Value accepts jsonb, json, text or varchar`},
		{name: "headers path into an integer column", cols: withPaths(Columns{ID: "Id", Payload: "Payload", Headers: "Status"}, "", "h"), table: outboxMessage,
			wantErr: `column "Status" has type integer, but field headers with the JSON path ->h accepts jsonb, json, text or varchar`},
		{name: "timestamp payload", cols: Columns{ID: "Id", Payload: "CreatedAt"}, table: outboxMessage,
			wantErr: `column "CreatedAt" has type timestamptz, but field payload accepts jsonb, json, text, varchar or bytea`},
		{name: "required field unmapped", cols: Columns{ID: "Id"}, table: outboxMessage, wantErr: "field payload is not mapped"},
		{name: "header columns of any type but bytea", cols: withHeaders(Columns{ID: "Id", Payload: "Payload"}, "Topic", "Status", "CreatedAt", "Id"), table: outboxMessage},
		{name: "header column missing", cols: withHeaders(Columns{ID: "Id", Payload: "Payload"}, "ContentType"), table: outboxMessage,
			wantErr: `column "ContentType" does not exist (header H0 is mapped to it); the table has "Id", "AggregateType"`},
		{name: "bytea header column", cols: withHeaders(Columns{ID: "Id", Payload: "Id"}, "Body"), table: []TableColumn{{Name: "Id", Type: oidText}, {Name: "Body", Type: oidBytea}},
			wantErr: `column "Body" has type bytea, which is no header value (header H0 is mapped to it): map the header to a text column`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.cols.CheckTable(`public."OutboxMessage"`, tt.table)
			if tt.wantErr == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("CheckTable error = %v, want it to contain %q", err, tt.wantErr)
			}
			var schemaErr *SchemaError
			if !strings.Contains(tt.wantErr, "not mapped") && !errors.As(err, &schemaErr) {
				t.Fatalf("CheckTable error %T, want a *SchemaError", err)
			}
		})
	}
}

// TestMappedTable decodes a row of the C# OutboxMessage table with only
// some fields mapped, and reads placeholders by column and by field name.
// withHeaders maps headers H0, H1, ... to the columns.
func withHeaders(c Columns, columns ...string) Columns {
	for i, col := range columns {
		c.HeaderColumns = append(c.HeaderColumns, HeaderColumn{Name: fmt.Sprintf("H%d", i), Column: col})
	}
	return c
}

func TestMappedTable(t *testing.T) {
	cfg := Config{Table: "OutboxMessage", Columns: Columns{ID: "Id", EventType: "Topic", Payload: "Payload", CreatedAt: "CreatedAt"}}
	cols := []col{{name: "Id", oid: oidUUID}, {name: "AggregateType", oid: oidText}, {name: "Topic", oid: oidText},
		{name: "Payload", oid: oidText}, {name: "CreatedAt", oid: oidTimestamptz}, {name: "Status", oid: 23}}
	d := newDecoder(t, cfg, relationMsg(outboxRelID, "public", "OutboxMessage", cols...), testBegin())
	ch, err := d.Decode(rowLSN, insertMsg(outboxRelID, text(testID), text("Order"), text("order-paid"),
		text(`{"a":1}`), text("2026-12-02 15:39:55.123456+00"), text("0")))
	if err != nil {
		t.Fatal(err)
	}
	ev := ch.Event
	if ev.ID != testID || ev.EventType != "order-paid" || ev.AggregateType != "" || ev.AggregateID != "" || string(ev.Payload) != `{"a":1}` {
		t.Fatalf("event %+v", ev)
	}
	for name, want := range map[string]string{"Topic": "order-paid", "event_type": "order-paid", "Status": "0", "AggregateType": "Order", "id": testID} {
		if got, ok := ev.Column(name); !ok || got != want {
			t.Errorf("Column(%q) = %q, %v; want %q", name, got, ok, want)
		}
	}
	for _, name := range []string{"aggregate_type", "aggregate_id", "topic", "nope"} {
		if got, ok := ev.Column(name); ok {
			t.Errorf("Column(%q) = %q, want none (not a column, not a mapped field)", name, got)
		}
	}
}

// jsonPath is NewJSONPath for keys a test knows to be good.
func jsonPath(keys ...string) JSONPath {
	p, err := NewJSONPath(keys...)
	if err != nil {
		panic(err)
	}
	return p
}

// withPaths is c with a one-key payload and headers path ("" for none).
func withPaths(c Columns, payloadKey, headersKey string) Columns {
	if payloadKey != "" {
		c.PayloadPath = jsonPath(payloadKey)
	}
	if headersKey != "" {
		c.HeadersPath = jsonPath(headersKey)
	}
	return c
}

func TestJSONPath(t *testing.T) {
	var zero JSONPath
	if !zero.IsZero() || zero.Keys() != nil || zero.String() != "" {
		t.Fatalf("zero JSONPath: IsZero %v, Keys %q, String %q", zero.IsZero(), zero.Keys(), zero.String())
	}
	p := jsonPath("Value", "", "a,b")
	if p.IsZero() || !reflect.DeepEqual(p.Keys(), []string{"Value", "", "a,b"}) || p.String() != `->Value->""->"a,b"` {
		t.Fatalf("JSONPath: IsZero %v, Keys %q, String %q", p.IsZero(), p.Keys(), p.String())
	}
	if p != jsonPath("Value", "", "a,b") || p == jsonPath("Value", "a,b") {
		t.Fatal("JSONPath compares by its keys")
	}
}
