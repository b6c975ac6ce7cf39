package replication

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
)

func TestParseTable(t *testing.T) {
	tests := []struct {
		name    string
		in      string
		want    Table
		wantErr string
	}{
		{name: "schema and table", in: "public.outbox", want: Table{"public", "outbox"}},
		{name: "table only is public", in: "outbox", want: Table{"public", "outbox"}},
		{name: "other schema", in: "sales.outbox", want: Table{"sales", "outbox"}},
		{name: "quoted with space and doubled quote", in: `"My Schema"."Out""box"`, want: Table{"My Schema", `Out"box`}},
		{name: "quoted table only", in: `"Outbox"`, want: Table{"public", "Outbox"}},
		{name: "quoted dot stays in the name", in: `"a.b"."c.d"`, want: Table{"a.b", "c.d"}},
		{name: "mixed quoting", in: `Sales."Outbox"`, want: Table{"sales", "Outbox"}},
		{name: "mixed case unquoted folds to lower", in: "Sales.OutBox", want: Table{"sales", "outbox"}},
		{name: "spaces around unquoted parts", in: " public . outbox ", want: Table{"public", "outbox"}},
		{name: "empty", in: "", wantErr: "empty name"},
		{name: "empty schema", in: ".outbox", wantErr: "empty name"},
		{name: "empty table", in: "public.", wantErr: "empty name"},
		{name: "empty middle", in: "public..outbox", wantErr: "empty name"},
		{name: "empty quoted", in: `"".outbox`, wantErr: "empty name"},
		{name: "blank", in: "  ", wantErr: "empty name"},
		{name: "unterminated quote", in: `"public.outbox`, wantErr: "unterminated quoted identifier"},
		{name: "unterminated after doubled quote", in: `public."out""`, wantErr: "unterminated quoted identifier"},
		{name: "garbage after quoted name", in: `"public"x.outbox`, wantErr: `unexpected 'x' after a quoted name`},
		{name: "space after quoted name", in: `"public" .outbox`, wantErr: `unexpected ' ' after a quoted name`},
		{name: "three parts", in: "db.public.outbox", wantErr: "has 3 dot-separated parts"},
		{name: "three quoted parts", in: `"db"."public"."outbox"`, wantErr: "has 3 dot-separated parts"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseTable(tt.in)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("ParseTable(%q) = %+v, %v; want error containing %q", tt.in, got, err, tt.wantErr)
				}
				// The error names the input and the accepted form.
				if !strings.Contains(err.Error(), fmt.Sprintf("%q", tt.in)) || !strings.Contains(err.Error(), "schema.table") {
					t.Errorf("error %q does not name the input and the form", err)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Fatalf("ParseTable(%q) = %+v, %v; want %+v", tt.in, got, err, tt.want)
			}
		})
	}
}

func TestTableString(t *testing.T) {
	tests := []struct {
		in   Table
		want string
	}{
		{Table{"public", "outbox"}, `"public"."outbox"`},
		{Table{"My Schema", `Out"box`}, `"My Schema"."Out""box"`},
		{Table{"Sales", "Outbox"}, `"Sales"."Outbox"`},
		{Table{"a.b", "c"}, `"a.b"."c"`},
	}
	for _, tt := range tests {
		t.Run(tt.want, func(t *testing.T) {
			if got := tt.in.String(); got != tt.want {
				t.Errorf("String() = %s, want %s", got, tt.want)
			}
			// What String prints, ParseTable reads back.
			back, err := ParseTable(tt.in.String())
			if err != nil || back != tt.in {
				t.Errorf("ParseTable(%s) = %+v, %v; want %+v", tt.in.String(), back, err, tt.in)
			}
		})
	}
}

func TestPermanent(t *testing.T) {
	pg := func(code string) error {
		return fmt.Errorf("start replication: %w", &pgconn.PgError{Code: code, Message: "m"})
	}
	tests := []struct {
		name string
		err  error
		want bool
	}{
		{"nil", nil, false},
		{"plain", errors.New("connection reset"), false},
		{"PreflightError", fmt.Errorf("preflight: %w", &PreflightError{Object: "x", Problem: "y", Fix: "z"}), true},
		{"certificate refused", fmt.Errorf("connect for replication: %w", &tls.CertificateVerificationError{Err: x509.UnknownAuthorityError{}}), true},
		{"28P01 invalid password", pg("28P01"), true},
		{"28000 invalid authorization", pg("28000"), true},
		{"3D000 no database", pg("3D000"), true},
		{"42704 undefined object (publication)", pg("42704"), true},
		{"42501 insufficient privilege", pg("42501"), true},
		{"55000 object not in prerequisite state (wal_level)", pg("55000"), true},
		{"XX000 internal error", pg("XX000"), true},
		{"55006 object in use (slot active)", pg("55006"), false},
		{"57P01 admin shutdown", pg("57P01"), false},
		{"57P02 crash shutdown", pg("57P02"), false},
		{"57P03 cannot connect now", pg("57P03"), false},
		{"57014 query canceled", pg("57014"), false},
		{"53300 too many connections", pg("53300"), false},
		{"53100 disk full", pg("53100"), false},
		{"08006 connection failure", pg("08006"), false},
		{"58030 io error", pg("58030"), false},
		{"classified slot active", classify("start replication", &pgconn.PgError{Code: "55006"}), false},
		{"classified undefined object", classify("start replication", &pgconn.PgError{Code: "42704"}), true},
		{"PgError without a code", pg(""), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Permanent(tt.err); got != tt.want {
				t.Errorf("Permanent(%v) = %v, want %v", tt.err, got, tt.want)
			}
		})
	}
}

func TestClassify(t *testing.T) {
	err := classify("start replication on slot \"s\"", &pgconn.PgError{Code: "55006", Message: `replication slot "s" is active for PID 42`})
	if !errors.Is(err, ErrSlotActive) {
		t.Errorf("55006: %v is not ErrSlotActive", err)
	}
	if !strings.Contains(err.Error(), "PID 42") || !strings.Contains(err.Error(), `slot "s"`) {
		t.Errorf("55006: %q lost the operation or the server's message", err)
	}
	other := &pgconn.PgError{Code: "42704"}
	err = classify("op", other)
	var pgErr *pgconn.PgError
	if errors.Is(err, ErrSlotActive) || !errors.As(err, &pgErr) || pgErr != other {
		t.Errorf("42704: %v, want the PgError wrapped", err)
	}
}

func TestConfigValidate(t *testing.T) {
	valid := func() Config { return Config{ConnString: "postgres://u@h/db"} }
	tests := []struct {
		name    string
		change  func(*Config)
		wantErr string
	}{
		{name: "defaults", change: func(*Config) {}},
		{name: "slot with digits and underscores", change: func(c *Config) { c.Slot = "outboxd_2" }},
		{name: "slot of 63 characters", change: func(c *Config) { c.Slot = strings.Repeat("a", 63) }},
		{name: "status interval 10ms", change: func(c *Config) { c.StatusInterval = 10 * time.Millisecond }},
		{name: "status interval 1m", change: func(c *Config) { c.StatusInterval = time.Minute }},
		{name: "no connection string", change: func(c *Config) { c.ConnString = "" }, wantErr: "connection string is empty"},
		{name: "slot upper case", change: func(c *Config) { c.Slot = "Outboxd" }, wantErr: `slot name "Outboxd" is invalid`},
		{name: "slot with dash", change: func(c *Config) { c.Slot = "out-boxd" }, wantErr: `slot name "out-boxd" is invalid`},
		{name: "slot with space", change: func(c *Config) { c.Slot = "out boxd" }, wantErr: `slot name "out boxd" is invalid`},
		{name: "slot of 64 characters", change: func(c *Config) { c.Slot = strings.Repeat("a", 64) }, wantErr: "is invalid: use 1-63"},
		{name: "status interval 5ms", change: func(c *Config) { c.StatusInterval = 5 * time.Millisecond },
			wantErr: "status interval 5ms is out of range: use 10ms to 1m"},
		{name: "status interval 2m", change: func(c *Config) { c.StatusInterval = 2 * time.Minute },
			wantErr: "status interval 2m0s is out of range: use 10ms to 1m"},
		{name: "status interval negative", change: func(c *Config) { c.StatusInterval = -time.Second },
			wantErr: "status interval -1s is out of range"},
		{name: "read linger 100ms", change: func(c *Config) { c.ReadLinger = 100 * time.Millisecond }},
		{name: "read linger negative", change: func(c *Config) { c.ReadLinger = -time.Millisecond },
			wantErr: "read linger -1ms is out of range: use 0 to 100ms"},
		{name: "read linger 1s", change: func(c *Config) { c.ReadLinger = time.Second },
			wantErr: "read linger 1s is out of range"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := valid()
			tt.change(&c)
			err := c.Validate()
			if tt.wantErr == "" {
				if err != nil {
					t.Fatalf("Validate() = %v, want nil", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("Validate() = %v, want error containing %q", err, tt.wantErr)
			}
		})
	}

	// Zero values mean the documented defaults.
	c := valid()
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	if c.Slot != "outboxd" || c.Publication != "outboxd" || c.StatusInterval != time.Second {
		t.Errorf("defaults: slot %q, publication %q, status interval %s", c.Slot, c.Publication, c.StatusInterval)
	}
}
