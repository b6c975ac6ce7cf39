package decoder

import (
	"errors"
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

		{name: "empty", in: "", wantErr: "is empty"},
		{name: "unknown field", in: "id=Id,evnt_type=Topic,payload=P", wantErr: `unknown field "evnt_type": use id, aggregate_type, aggregate_id, event_type, payload, headers, created_at`},
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
			if err != nil || got != tt.want {
				t.Fatalf("ParseColumns(%q) = %+v, %v; want %+v", tt.in, got, err, tt.want)
			}
			again, err := ParseColumns(got.String())
			if err != nil || again != got {
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
		{name: "integer id", cols: Columns{ID: "Status", Payload: "Payload"}, table: outboxMessage,
			wantErr: `column "Status" has type integer, but field id accepts uuid, text or varchar`},
		{name: "timestamp payload", cols: Columns{ID: "Id", Payload: "CreatedAt"}, table: outboxMessage,
			wantErr: `column "CreatedAt" has type timestamptz, but field payload accepts jsonb, json, text, varchar or bytea`},
		{name: "required field unmapped", cols: Columns{ID: "Id"}, table: outboxMessage, wantErr: "field payload is not mapped"},
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
