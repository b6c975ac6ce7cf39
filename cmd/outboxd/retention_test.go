package main

import (
	"testing"
	"time"
)

func TestRetentionSettings(t *testing.T) {
	cfg, err := parseRun(t, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.relay.Retention.On || cfg.RetentionBatch != 1000 || cfg.RetentionPause != 100*time.Millisecond || cfg.RetentionWait != time.Minute {
		t.Errorf("defaults: on %v, batch %d, pause %s, wait %s", cfg.relay.Retention.On, cfg.RetentionBatch, cfg.RetentionPause, cfg.RetentionWait)
	}
	for _, tt := range []struct {
		name string
		args []string
		env  map[string]string
		age  time.Duration
	}{
		{name: "age 0", args: []string{"--retention", "0s"}},
		{name: "a week from the environment", env: map[string]string{"OUTBOXD_RETENTION": "168h"}, age: 168 * time.Hour},
		{name: "mapped created_at", args: []string{"--retention", "72h", "--columns", "id=Id,payload=Content,created_at=CreatedAt"}, age: 72 * time.Hour},
		{name: "no created_at needed for age 0", args: []string{"--retention", "0s", "--columns", "id=Id,payload=Content"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			cfg, err := parseRun(t, tt.args, tt.env)
			if err != nil {
				t.Fatal(err)
			}
			if !cfg.relay.Retention.On || cfg.relay.Retention.Age != tt.age {
				t.Errorf("retention on %v age %s, want on, %s", cfg.relay.Retention.On, cfg.relay.Retention.Age, tt.age)
			}
		})
	}
}

func TestBadRetention(t *testing.T) {
	for _, tt := range []struct {
		name    string
		args    []string
		wantErr []string
	}{
		{name: "not a duration", args: []string{"--retention", "7d"}, wantErr: []string{`--retention "7d" is not an age`, "off", "72h"}},
		{name: "negative", args: []string{"--retention", "-1h"}, wantErr: []string{`--retention "-1h" is not an age`}},
		{name: "age without created_at", args: []string{"--retention", "24h", "--columns", "id=Id,payload=Content"},
			wantErr: []string{"--retention 24h needs the rows' age", "created_at=CreatedAt", "--retention 0s"}},
		{name: "null sink", args: []string{"--retention", "0s", "--sink", "null"}, wantErr: []string{"never published"}},
		{name: "no table", args: []string{"--retention", "0s", "--table", ""}, wantErr: []string{"no table to delete from"}},
		{name: "batch 0", args: []string{"--retention", "0s", "--retention-batch", "0"}, wantErr: []string{"--retention-batch 0 is out of range: use 1 to 100000"}},
		{name: "pause too short", args: []string{"--retention", "0s", "--retention-pause", "1ms"}, wantErr: []string{"--retention-pause 1ms is out of range"}},
		{name: "empty zone", args: []string{"--retention", "1h", "--created-at-zone", " "}, wantErr: []string{"--created-at-zone is empty", "UTC"}},
		{name: "wait too short", args: []string{"--retention", "0s", "--retention-wait", "100ms"}, wantErr: []string{"--retention-wait 100ms is out of range"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := parseRun(t, tt.args, nil)
			checkErr(t, err, tt.wantErr)
		})
	}
}
