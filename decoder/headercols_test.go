package decoder

import (
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/outboxd/outboxd/event"
)

// Headers from columns of their own (MassTransit's ContentType) and from a
// column in Java properties format (Debezium's tracingspancontext).

// debeziumCols is Debezium's outbox event router table.
func debeziumCols() []col {
	return []col{{name: "id", oid: oidUUID, flags: 1}, {name: "aggregatetype", oid: oidVarchar}, {name: "aggregateid", oid: oidVarchar},
		{name: "type", oid: oidVarchar}, {name: "payload", oid: oidJSONB}, {name: "tracingspancontext", oid: oidVarchar}}
}

func debeziumRow(span val) []val {
	return []val{text(testID), text("Order"), text("1001"), text("OrderCreated"), text(`{"id": 1001}`), span}
}

func debeziumConfig(tb testing.TB) Config {
	tb.Helper()
	c, err := ParseColumns("id=id,aggregate_type=aggregatetype,aggregate_id=aggregateid,event_type=type,payload=payload,headers=tracingspancontext")
	if err != nil {
		tb.Fatal(err)
	}
	c.HeadersFormat = HeadersProperties
	return Config{Table: "outboxevent", Columns: c}
}

// massTransitCols is MassTransit's "OutboxMessage", the columns outboxd reads.
func massTransitCols() []col {
	return []col{{name: "SequenceNumber", oid: oidInt8, flags: 1}, {name: "Headers", oid: oidText}, {name: "MessageId", oid: oidUUID},
		{name: "ContentType", oid: oidVarchar}, {name: "MessageType", oid: oidText}, {name: "Body", oid: oidText}, {name: "SentTime", oid: oidTimestamptz}}
}

func massTransitRow(headers, contentType val) []val {
	return []val{text("7"), headers, text(testID), contentType, text("urn:message:Shop.Contracts:OrderSubmitted"), text(`{"message": {}}`),
		text("2024-03-14 08:26:53.106142+00")}
}

func massTransitConfig(tb testing.TB) Config {
	tb.Helper()
	c, err := ParseColumns("id=MessageId,event_type=MessageType,payload=Body,headers=Headers,created_at=SentTime,header.Content-Type=ContentType,header.MT-Sequence=SequenceNumber")
	if err != nil {
		tb.Fatal(err)
	}
	return Config{Table: "OutboxMessage", Columns: c}
}

func TestDecodeHeaderColumns(t *testing.T) {
	const traceparent = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
	tests := []struct {
		name string
		cfg  Config
		cols []col
		row  []val
		want []event.Header
	}{
		{name: "Debezium: traceparent from the properties text", cfg: debeziumConfig(t), cols: debeziumCols(),
			row:  debeziumRow(text("#Thu Mar 14 08:26:53 UTC 2024\ntraceparent=" + traceparent + "\n")),
			want: []event.Header{{Key: "traceparent", Value: traceparent}}},
		{name: "Debezium: no trace context", cfg: debeziumConfig(t), cols: debeziumCols(), row: debeziumRow(null)},
		{name: "MassTransit: headers column, then the columns' headers", cfg: massTransitConfig(t), cols: massTransitCols(),
			row: massTransitRow(text(`{"MT-Activity-Id": "00-ab-01", "Priority": 5}`), text("application/vnd.masstransit+json")),
			want: []event.Header{{Key: "MT-Activity-Id", Value: "00-ab-01"}, {Key: "Priority", Value: "5"},
				{Key: "Content-Type", Value: "application/vnd.masstransit+json"}, {Key: "MT-Sequence", Value: "7"}}},
		{name: "MassTransit: NULL Headers", cfg: massTransitConfig(t), cols: massTransitCols(),
			row:  massTransitRow(null, text("application/json")),
			want: []event.Header{{Key: "Content-Type", Value: "application/json"}, {Key: "MT-Sequence", Value: "7"}}},
		{name: "a column's header replaces the headers column's", cfg: massTransitConfig(t), cols: massTransitCols(),
			row:  massTransitRow(text(`{"Content-Type": "text/plain", "a": "b", "Content-Type": "x"}`), text("application/json")),
			want: []event.Header{{Key: "a", Value: "b"}, {Key: "Content-Type", Value: "application/json"}, {Key: "MT-Sequence", Value: "7"}}},
		{name: "a NULL column leaves its header out", cfg: massTransitConfig(t), cols: massTransitCols(),
			row:  massTransitRow(null, null),
			want: []event.Header{{Key: "MT-Sequence", Value: "7"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ev, err := decodeOne(t, tt.cfg, tt.cols, tt.row)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(ev.Headers, tt.want) {
				t.Errorf("headers %q, want %q", ev.Headers, tt.want)
			}
		})
	}
}

func TestDecodeHeaderColumnErrors(t *testing.T) {
	tests := []struct {
		name       string
		cfg        Config
		cols       []col
		row        []val
		wantColumn string
		wantReason string
		// wantRowHeaders are the dead letter's: the headers column's,
		// whole, whatever a header column did before the one that failed.
		wantRowHeaders []event.Header
	}{
		{name: "Debezium: a malformed escape", cfg: debeziumConfig(t), cols: debeziumCols(), row: debeziumRow(text("traceparent=\\u00zz")),
			wantColumn: "tracingspancontext", wantReason: `is not in properties format: line 1: malformed \u escape "\\u00zz"`},
		{name: "a control character in a column's header", cfg: massTransitConfig(t), cols: massTransitCols(),
			row: massTransitRow(null, text("application/json\r\nNats-Msg-Id: x")), wantColumn: "ContentType",
			wantReason: `cannot fill header "Content-Type" whose value holds the control character '\r' at byte 16: header values must be printable; clean the value or map another column`},
		{name: "a later header column fails after one replaced a header", cfg: withHeaderColumns(massTransitConfig(t), headerColumn("X-Type", "MessageType"), headerColumn("X-Bad", "ContentType")),
			cols: massTransitCols(), row: massTransitRow(text(`{"MT-Activity-Id": "a", "X-Type": "old", "Priority": 5}`), text("bad\nvalue")),
			wantColumn: "ContentType", wantReason: `cannot fill header "X-Bad"`,
			wantRowHeaders: []event.Header{{Key: "MT-Activity-Id", Value: "a"}, {Key: "X-Type", Value: "old"}, {Key: "Priority", Value: "5"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := decodeOne(t, tt.cfg, tt.cols, tt.row)
			var re *event.RowError
			if !errors.As(err, &re) {
				t.Fatalf("error %v, want a *event.RowError", err)
			}
			if re.EventID != testID || re.Column != tt.wantColumn || !strings.Contains(err.Error(), tt.wantReason) {
				t.Errorf("RowError id %q column %q: %v\nwant id %q, column %q, saying %q", re.EventID, re.Column, err, testID, tt.wantColumn, tt.wantReason)
			}
			if re.Row == nil || re.Row.ID != testID {
				t.Fatalf("RowError.Row %+v, want the row for its dead letter", re.Row)
			}
			if !reflect.DeepEqual(re.Row.Headers, tt.wantRowHeaders) {
				t.Errorf("dead letter's headers %q, want %q", re.Row.Headers, tt.wantRowHeaders)
			}
		})
	}
}

func TestHeaderOptions(t *testing.T) {
	props := func(c Columns) Columns { c.HeadersFormat = HeadersProperties; return c }
	tests := []struct {
		name    string
		cols    Columns
		wantErr string
	}{
		{name: "properties", cols: props(DefaultColumns())},
		{name: "properties without a headers column", cols: props(Columns{ID: "id", Payload: "p"}),
			wantErr: `headers format "properties" reads the headers column, which is not mapped: map it`},
		{name: "properties with a JSON path", cols: props(withPaths(DefaultColumns(), "", "h")),
			wantErr: `headers format "properties" has no JSON path: map headers to the whole column (headers=headers, without ->h)`},
		{name: "unknown format", cols: Columns{ID: "id", Payload: "p", HeadersFormat: "yaml"}, wantErr: `headers format "yaml" is not one of json, properties`},
		{name: "reserved header name", cols: withHeadersNamed(DefaultColumns(), "Nats-Expected-Stream"), wantErr: "headers starting with Nats- are set by JetStream and outboxd"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := New(Config{Columns: tt.cols})
			if tt.wantErr == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("New error = %v, want it to contain %q", err, tt.wantErr)
			}
		})
	}
	for _, in := range []string{"", "json", "properties"} {
		if _, err := ParseHeadersFormat(in); err != nil {
			t.Errorf("ParseHeadersFormat(%q): %v", in, err)
		}
	}
	if _, err := ParseHeadersFormat("Properties"); err == nil || !strings.Contains(err.Error(), `headers format "Properties" is not one of json`) {
		t.Errorf("ParseHeadersFormat(Properties) error = %v", err)
	}
}

// withHeaderColumns puts hcs before the config's own header columns.
func withHeaderColumns(cfg Config, hcs ...HeaderColumn) Config {
	cfg.Columns.HeaderColumns = append(hcs, cfg.Columns.HeaderColumns...)
	return cfg
}

func headerColumn(name, column string) HeaderColumn { return HeaderColumn{Name: name, Column: column} }

func withHeadersNamed(c Columns, names ...string) Columns {
	for _, n := range names {
		c.HeaderColumns = append(c.HeaderColumns, HeaderColumn{Name: n, Column: "id"})
	}
	return c
}
