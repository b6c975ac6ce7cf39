package decoder

import (
	"testing"
	"time"
)

func TestParseTimestamp(t *testing.T) {
	utc := func(y int, mo time.Month, d, h, mi, s, ns int) time.Time {
		return time.Date(y, mo, d, h, mi, s, ns, time.UTC)
	}
	tests := []struct {
		name    string
		in      string
		want    time.Time
		wantErr bool
	}{
		{name: "utc with micros", in: "2026-12-02 15:39:55.123456+00", want: utc(2026, 12, 2, 15, 39, 55, 123456000)},
		{name: "no fraction", in: "2026-12-02 15:39:55+00", want: utc(2026, 12, 2, 15, 39, 55, 0)},
		{name: "short fraction", in: "2026-12-02 15:39:55.5+00", want: utc(2026, 12, 2, 15, 39, 55, 500000000)},
		{name: "nanosecond fraction", in: "2026-12-02 15:39:55.000000001+00", want: utc(2026, 12, 2, 15, 39, 55, 1)},
		{name: "half-hour offset", in: "2026-12-02 21:09:55.123456+05:30", want: utc(2026, 12, 2, 15, 39, 55, 123456000)},
		{name: "negative offset crossing midnight", in: "2026-12-31 20:00:00-08", want: utc(2027, 1, 1, 4, 0, 0, 0)},
		{name: "offset with seconds", in: "1900-01-01 00:09:21+00:09:21", want: utc(1900, 1, 1, 0, 0, 0, 0)},
		{name: "timestamp without time zone", in: "2026-12-02 15:39:55.123456", want: utc(2026, 12, 2, 15, 39, 55, 123456000)},
		{name: "T separator", in: "2026-12-02T15:39:55+00", want: utc(2026, 12, 2, 15, 39, 55, 0)},
		{name: "leap day", in: "2028-02-29 00:00:00+00", want: utc(2028, 2, 29, 0, 0, 0, 0)},
		{name: "five-digit year", in: "12026-01-01 00:00:00+00", want: utc(12026, 1, 1, 0, 0, 0, 0)},
		{name: "BC", in: "0044-03-15 12:00:00+00 BC", want: utc(-43, 3, 15, 12, 0, 0, 0)},

		{name: "infinity", in: "infinity", wantErr: true},
		{name: "minus infinity", in: "-infinity", wantErr: true},
		{name: "empty", in: "", wantErr: true},
		{name: "date only", in: "2026-12-02", wantErr: true},
		{name: "February 30", in: "2026-02-30 00:00:00+00", wantErr: true},
		{name: "not a leap year", in: "2026-02-29 00:00:00+00", wantErr: true},
		{name: "month 13", in: "2026-13-01 00:00:00+00", wantErr: true},
		{name: "hour 24", in: "2026-12-02 24:00:00+00", wantErr: true},
		{name: "minute 60", in: "2026-12-02 23:60:00+00", wantErr: true},
		{name: "three-digit year", in: "026-12-02 15:39:55+00", wantErr: true},
		{name: "dot without digits", in: "2026-12-02 15:39:55.+00", wantErr: true},
		{name: "ten fraction digits", in: "2026-12-02 15:39:55.1234567890+00", wantErr: true},
		{name: "one-digit offset", in: "2026-12-02 15:39:55+0", wantErr: true},
		{name: "offset without colon", in: "2026-12-02 15:39:55+0530", wantErr: true},
		{name: "zone name", in: "2026-12-02 15:39:55 UTC", wantErr: true},
		{name: "Z suffix", in: "2026-12-02T15:39:55Z", wantErr: true},
		{name: "SQL DateStyle", in: "12/02/2026 15:39:55.123456 UTC", wantErr: true},
		{name: "Postgres DateStyle", in: "Wed Dec 02 15:39:55.123456 2026 UTC", wantErr: true},
		{name: "trailing space", in: "2026-12-02 15:39:55+00 ", wantErr: true},
		{name: "lower-case bc", in: "0044-03-15 12:00:00+00 bc", wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := parseTimestamp([]byte(tt.in))
			if tt.wantErr {
				if err == nil {
					t.Fatalf("parseTimestamp(%q) = %v, want an error", tt.in, got)
				}
				return
			}
			if err != nil || !got.Equal(tt.want) || got.Location() != time.UTC {
				t.Fatalf("parseTimestamp(%q) = %v, %v; want %v in UTC", tt.in, got, err, tt.want)
			}
		})
	}
}

func TestPgTime(t *testing.T) {
	tests := []struct {
		name string
		us   int64
		want time.Time
	}{
		{name: "epoch", us: 0, want: time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)},
		{name: "after", us: 1_500_001, want: time.Date(2000, 1, 1, 0, 0, 1, 500001000, time.UTC)},
		{name: "before", us: -1, want: time.Date(1999, 12, 31, 23, 59, 59, 999999000, time.UTC)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := pgTime(tt.us); !got.Equal(tt.want) {
				t.Fatalf("pgTime(%d) = %v, want %v", tt.us, got, tt.want)
			}
		})
	}
	// Extreme values from a corrupt message must not panic.
	_ = pgTime(1<<63 - 1)
	_ = pgTime(-1 << 63)
}
