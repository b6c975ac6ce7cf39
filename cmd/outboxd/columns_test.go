package main

import (
	"reflect"
	"testing"

	"github.com/outboxd/outboxd/decoder"
)

// TestColumnsConfigKey: the mapping is also the config file key columns,
// and a bad one there names the key and the file.
func TestColumnsConfigKey(t *testing.T) {
	path := writeConfig(t, "columns: id=Id,event_type=Topic,payload=Payload,created_at=CreatedAt\n")
	cfg, err := parseRun(t, []string{"--config", path}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if want := (decoder.Columns{ID: "Id", EventType: "Topic", Payload: "Payload", CreatedAt: "CreatedAt"}); !reflect.DeepEqual(cfg.relay.Columns, want) {
		t.Errorf("columns from the file: %+v, want %+v", cfg.relay.Columns, want)
	}
	bad := writeConfig(t, "columns: event_type=Topic,payload=Payload\n")
	_, err = parseRun(t, []string{"--config", bad}, nil)
	checkErr(t, err, []string{"--columns", "field id is not mapped", `key "columns"`, bad})
}

// TestHeadersFormat: --headers-format reads the headers column as JSON
// (the default) or properties text; a bad value, or properties without a
// headers column, names the flag and the fix.
func TestHeadersFormat(t *testing.T) {
	debezium := "--columns=id=id,aggregate_type=aggregatetype,payload=payload,headers=tracingspancontext,header.Content-Type=ct"
	cfg, err := parseRun(t, []string{debezium, "--headers-format", "properties"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	want := decoder.Columns{ID: "id", AggregateType: "aggregatetype", Payload: "payload", Headers: "tracingspancontext",
		HeadersFormat: decoder.HeadersProperties, HeaderColumns: []decoder.HeaderColumn{{Name: "Content-Type", Column: "ct"}}}
	if !reflect.DeepEqual(cfg.relay.Columns, want) {
		t.Errorf("columns %+v, want %+v", cfg.relay.Columns, want)
	}
	cfg, err = parseRun(t, nil, map[string]string{"OUTBOXD_HEADERS_FORMAT": "json"})
	if err != nil || cfg.relay.Columns.HeadersFormat != decoder.HeadersJSON {
		t.Errorf("OUTBOXD_HEADERS_FORMAT=json: %v, format %q", err, cfg.relay.Columns.HeadersFormat)
	}
	_, err = parseRun(t, []string{"--headers-format", "yaml"}, nil)
	checkErr(t, err, []string{"--headers-format", `"yaml" is not one of json`, "properties"})
	_, err = parseRun(t, []string{"--columns=id=id,payload=payload", "--headers-format", "properties"}, nil)
	checkErr(t, err, []string{"--headers-format", "reads the headers column, which is not mapped", "headers=tracingspancontext"})
	_, err = parseRun(t, []string{"--columns=id=id,payload=payload,header.Nats-Msg-Id=id"}, nil)
	checkErr(t, err, []string{"--columns", "headers starting with Nats- are set by JetStream and outboxd"})
}
