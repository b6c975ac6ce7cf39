package main

import (
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
	if want := (decoder.Columns{ID: "Id", EventType: "Topic", Payload: "Payload", CreatedAt: "CreatedAt"}); cfg.relay.Columns != want {
		t.Errorf("columns from the file: %+v, want %+v", cfg.relay.Columns, want)
	}
	bad := writeConfig(t, "columns: event_type=Topic,payload=Payload\n")
	_, err = parseRun(t, []string{"--config", bad}, nil)
	checkErr(t, err, []string{"--columns", "field id is not mapped", `key "columns"`, bad})
}
