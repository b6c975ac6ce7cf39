package checkpoint

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pglogrepl"
)

func testCheckpoint() Checkpoint {
	return Checkpoint{
		LSN:      pglogrepl.LSN(0x16_B374D848),
		SystemID: "7351234567890123456",
		Timeline: 2,
		Slot:     "outboxd",
		SavedAt:  time.Date(2025, 3, 4, 5, 6, 7, 8, time.UTC),
	}
}

func TestCheckpointJSONFormat(t *testing.T) {
	got, err := json.Marshal(testCheckpoint())
	if err != nil {
		t.Fatal(err)
	}
	// The stored form is a file format: changing this string breaks every
	// saved checkpoint.
	want := `{"lsn":"16/B374D848","system_id":"7351234567890123456","timeline":2,"slot":"outboxd","saved_at":"2025-03-04T05:06:07.000000008Z"}`
	if string(got) != want {
		t.Errorf("Marshal =\n%s\nwant\n%s", got, want)
	}
	var back Checkpoint
	if err := json.Unmarshal(got, &back); err != nil {
		t.Fatal(err)
	}
	if back != testCheckpoint() {
		t.Errorf("round trip = %+v, want %+v", back, testCheckpoint())
	}
	withRows := testCheckpoint()
	withRows.BeforeSlot = "750:755:751"
	if got, _ := json.Marshal(withRows); !strings.HasSuffix(string(got), `,"before_slot":"750:755:751"}`) {
		t.Errorf("Marshal with BeforeSlot = %s, want it last as before_slot", got)
	}
}

func TestCheckpointUnmarshal(t *testing.T) {
	tests := []struct {
		name    string
		in      string
		want    Checkpoint
		wantErr string
	}{
		{
			name: "unknown fields are ignored",
			in:   `{"lsn":"0/10","system_id":"1","timeline":1,"slot":"s","format":3,"note":"x"}`,
			want: Checkpoint{LSN: 0x10, SystemID: "1", Timeline: 1, Slot: "s"},
		},
		{name: "lowercase hex", in: `{"lsn":"a/b"}`, want: Checkpoint{LSN: 0xA_0000000B}},
		{name: "rows before the slot", in: `{"lsn":"0/10","before_slot":"750:755:751,753"}`, want: Checkpoint{LSN: 0x10, BeforeSlot: "750:755:751,753"}},
		{name: "no row before the slot", in: `{"lsn":"0/10","before_slot":"none"}`, want: Checkpoint{LSN: 0x10, BeforeSlot: NoneBeforeSlot}},
		{name: "largest lsn", in: `{"lsn":"FFFFFFFF/FFFFFFFF"}`, want: Checkpoint{LSN: 1<<64 - 1}},
		{name: "missing lsn", in: `{"system_id":"1"}`, wantErr: "checkpoint has no lsn"},
		{name: "trailing garbage", in: `{"lsn":"0/10zz"}`, wantErr: `invalid lsn "0/10zz"`},
		{name: "no slash", in: `{"lsn":"1234"}`, wantErr: `invalid lsn "1234"`},
		{name: "too many hex digits", in: `{"lsn":"1/123456789"}`, wantErr: `invalid lsn "1/123456789"`},
		{name: "sign", in: `{"lsn":"+1/2"}`, wantErr: `invalid lsn "+1/2"`},
		{name: "empty half", in: `{"lsn":"1/"}`, wantErr: `invalid lsn "1/"`},
		{name: "lsn as number", in: `{"lsn":16}`, wantErr: "cannot unmarshal number"},
		{name: "not json", in: `lsn=0/10`, wantErr: "invalid character"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got Checkpoint
			err := json.Unmarshal([]byte(tt.in), &got)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want it to contain %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got != tt.want {
				t.Errorf("got %+v, want %+v", got, tt.want)
			}
		})
	}
}

func TestCheckpointMatches(t *testing.T) {
	cp := testCheckpoint()
	tests := []struct {
		name      string
		systemID  string
		timeline  int32
		slot      string
		wantField []string // empty: match
		wantText  []string
	}{
		{name: "same", systemID: cp.SystemID, timeline: 2, slot: "outboxd"},
		{
			name: "system id", systemID: "999", timeline: 2, slot: "outboxd",
			wantField: []string{"system_id"},
			wantText:  []string{`"7351234567890123456"`, `"999"`, "different database cluster"},
		},
		{
			name: "timeline", systemID: cp.SystemID, timeline: 3, slot: "outboxd",
			wantField: []string{"timeline"},
			wantText:  []string{`"2"`, `"3"`, "failover to another primary"},
		},
		{
			name: "slot", systemID: cp.SystemID, timeline: 2, slot: "other",
			wantField: []string{"slot"},
			wantText:  []string{`"outboxd"`, `"other"`, "another replication slot"},
		},
		{
			name: "all three", systemID: "9", timeline: 1, slot: "x",
			wantField: []string{"system_id", "timeline", "slot"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := cp.Matches(tt.systemID, tt.timeline, tt.slot)
			if len(tt.wantField) == 0 {
				if err != nil {
					t.Fatalf("Matches: %v", err)
				}
				return
			}
			if !errors.Is(err, ErrMismatch) {
				t.Fatalf("err = %v, want ErrMismatch", err)
			}
			var fields []string
			if j, ok := err.(interface{ Unwrap() []error }); ok {
				for _, e := range j.Unwrap() {
					fields = append(fields, e.(*MismatchError).Field)
				}
			} else {
				fields = append(fields, err.(*MismatchError).Field)
			}
			if strings.Join(fields, ",") != strings.Join(tt.wantField, ",") {
				t.Errorf("fields = %v, want %v", fields, tt.wantField)
			}
			for _, s := range tt.wantText {
				if !strings.Contains(err.Error(), s) {
					t.Errorf("error %q does not contain %q", err, s)
				}
			}
		})
	}
}

func TestParseLocation(t *testing.T) {
	tests := []struct {
		name    string
		in      string
		want    Location
		wantErr string
	}{
		{name: "kv", in: "kv:outboxd", want: Location{Kind: KindKV, Bucket: "outboxd"}},
		{name: "kv all chars", in: "kv:A-z_09", want: Location{Kind: KindKV, Bucket: "A-z_09"}},
		{name: "file", in: "file:/var/lib/outboxd/cp.json", want: Location{Kind: KindFile, Path: "/var/lib/outboxd/cp.json"}},
		{name: "file relative, cleaned", in: "file:./state//cp.json", want: Location{Kind: KindFile, Path: "state/cp.json"}},
		{name: "file path with colon", in: "file:/tmp/a:b", want: Location{Kind: KindFile, Path: "/tmp/a:b"}},
		{name: "no kind", in: "outboxd", wantErr: `invalid checkpoint location "outboxd": want "kv:BUCKET"`},
		{name: "unknown kind", in: "s3:bucket", wantErr: `unknown kind "s3"`},
		{name: "upper-case kind", in: "KV:outboxd", wantErr: `unknown kind "KV"`},
		{name: "empty bucket", in: "kv:", wantErr: `bucket "" is not a valid name`},
		{name: "bucket with dot", in: "kv:out.boxd", wantErr: `bucket "out.boxd" is not a valid name`},
		{name: "bucket with slash", in: "kv:outboxd/slot", wantErr: `bucket "outboxd/slot"`},
		{name: "bucket with space", in: "kv:out boxd", wantErr: `bucket "out boxd"`},
		{name: "empty path", in: "file:", wantErr: "empty path"},
		{name: "empty", in: "", wantErr: `invalid checkpoint location ""`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseLocation(tt.in)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want it to contain %q", err, tt.wantErr)
				}
				if !strings.Contains(err.Error(), `"file:PATH"`) {
					t.Errorf("err %q does not name the accepted forms", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got != tt.want {
				t.Errorf("got %+v, want %+v", got, tt.want)
			}
			if again, err := ParseLocation(got.String()); err != nil || again != got {
				t.Errorf("ParseLocation(%q) = %+v, %v; want %+v", got.String(), again, err, got)
			}
		})
	}
}
