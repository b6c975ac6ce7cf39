package pgcluster

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

func startCluster(t *testing.T, opts Options) *Cluster {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c, err := Start(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("tail of %s:\n%s", c.LogFile(), c.LogTail(30))
		}
		if err := c.Close(); err != nil {
			t.Errorf("close: %v", err)
		}
	})
	return c
}

func connect(t *testing.T, c *Cluster) *pgx.Conn {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, c.DSN("postgres"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	return conn
}

func show(t *testing.T, conn *pgx.Conn, setting string) string {
	t.Helper()
	var v string
	if err := conn.QueryRow(context.Background(), "SHOW "+setting).Scan(&v); err != nil {
		t.Fatalf("SHOW %s: %v", setting, err)
	}
	return v
}

func TestStart(t *testing.T) {
	c := startCluster(t, Options{ExtraConf: map[string]string{"work_mem": "8MB", "application_name": "it's"}})
	conn := connect(t, c)
	for setting, want := range map[string]string{
		"wal_level":        "logical",
		"port":             strconv.Itoa(c.Port()),
		"fsync":            "off",
		"work_mem":         "8MB",
		"application_name": "it's",
	} {
		if got := show(t, conn, setting); got != want {
			t.Errorf("SHOW %s = %q, want %q", setting, got, want)
		}
	}
	if os.Geteuid() == 0 {
		fi, err := os.Stat(filepath.Join(c.Dir(), "data", "postmaster.pid"))
		if err != nil {
			t.Fatal(err)
		}
		if st := fi.Sys().(*syscall.Stat_t); st.Uid == 0 {
			t.Errorf("postmaster.pid is owned by root, so the server runs as root")
		}
	}
	if !strings.HasPrefix(c.DSN("x"), "postgres://postgres@127.0.0.1:") {
		t.Errorf("DSN = %q", c.DSN("x"))
	}
}

func TestStopStart(t *testing.T) {
	for _, mode := range []string{"fast", "immediate"} {
		t.Run(mode, func(t *testing.T) {
			ctx := context.Background()
			c := startCluster(t, Options{})
			conn := connect(t, c)
			if _, err := conn.Exec(ctx, "CREATE TABLE kept (v text); INSERT INTO kept VALUES ('before stop')"); err != nil {
				t.Fatal(err)
			}
			port := c.Port()
			if err := c.Stop(mode); err != nil {
				t.Fatal(err)
			}
			if err := conn.Ping(ctx); err == nil {
				t.Fatal("ping after Stop succeeded")
			}
			if err := c.Stop(mode); err != nil {
				t.Errorf("second Stop: %v", err)
			}
			if err := c.Start(ctx); err != nil {
				t.Fatal(err)
			}
			if c.Port() != port {
				t.Errorf("port after restart = %d, want %d", c.Port(), port)
			}
			var v string
			if err := connect(t, c).QueryRow(ctx, "SELECT v FROM kept").Scan(&v); err != nil || v != "before stop" {
				t.Errorf("after restart: v = %q, err = %v; want %q", v, err, "before stop")
			}
		})
	}
}

func TestStopBadMode(t *testing.T) {
	c := &Cluster{}
	if err := c.Stop("smart"); err == nil {
		t.Error("Stop(\"smart\") = nil, want an error")
	}
}

func TestStartInGivenDir(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "cluster")
	c := startCluster(t, Options{Dir: dir})
	if c.Dir() != dir {
		t.Errorf("Dir() = %q, want %q", c.Dir(), dir)
	}
	if got := show(t, connect(t, c), "wal_level"); got != "logical" {
		t.Errorf("wal_level = %q", got)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "data", "PG_VERSION")); err != nil {
		t.Errorf("Close removed a folder it did not create: %v", err)
	}
}

func TestCloseRemovesTempDir(t *testing.T) {
	c, err := Start(context.Background(), Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(c.Dir()); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("after Close, stat %s: %v; want not exist", c.Dir(), err)
	}
}

func TestFindBinDir(t *testing.T) {
	root := t.TempDir()
	mkBin := func(version string, names ...string) string {
		dir := filepath.Join(root, version, "bin")
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		for _, n := range names {
			if err := os.WriteFile(filepath.Join(dir, n), nil, 0o755); err != nil {
				t.Fatal(err)
			}
		}
		return dir
	}
	mkBin("9.6", "initdb", "postgres")
	v15 := mkBin("15", "initdb", "postgres")
	mkBin("16", "initdb") // incomplete: skipped
	t.Setenv("PATH", t.TempDir())

	tests := []struct {
		name    string
		binDir  string
		glob    string
		want    string
		wantErr string
	}{
		{name: "newest complete", glob: filepath.Join(root, "*", "bin"), want: v15},
		{name: "explicit", binDir: v15, glob: "/nonexistent/*", want: v15},
		{name: "explicit incomplete", binDir: filepath.Join(root, "16", "bin"), wantErr: "postgres"},
		{name: "none", glob: filepath.Join(root, "none", "*"), wantErr: "apt-get install postgresql-15"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := findBinDir(tt.binDir, tt.glob)
			if tt.wantErr != "" {
				if err == nil || !errors.Is(err, ErrNoBinaries) || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want ErrNoBinaries mentioning %q", err, tt.wantErr)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Fatalf("findBinDir = %q, %v; want %q", got, err, tt.want)
			}
		})
	}
}

func TestBinDirFor(t *testing.T) {
	debian, npm := t.TempDir(), t.TempDir()
	mkBin := func(root, major string) string {
		dir := filepath.Join(root, major, "bin")
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		for _, n := range []string{"initdb", "postgres"} {
			if err := os.WriteFile(filepath.Join(dir, n), nil, 0o755); err != nil {
				t.Fatal(err)
			}
		}
		return dir
	}
	deb15, npm17 := mkBin(debian, "15"), mkBin(npm, "17")
	mkBin(npm, "15") // shadowed by Debian's

	tests := []struct {
		major   int
		want    string
		wantErr string
	}{
		{major: 15, want: deb15}, // Debian's package first
		{major: 17, want: npm17},
		{major: 16, wantErr: `scripts/ensure-postgres 16`},
		{major: 13, wantErr: "tested on 14 to 18"},
		{major: 19, wantErr: "tested on 14 to 18"},
	}
	for _, tt := range tests {
		t.Run(strconv.Itoa(tt.major), func(t *testing.T) {
			got, err := binDirFor(tt.major, debian, []string{npm})
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want one mentioning %q", err, tt.wantErr)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Fatalf("binDirFor(%d) = %q, %v; want %q", tt.major, got, err, tt.want)
			}
		})
	}
}
