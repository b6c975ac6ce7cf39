package checkpoint

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/jackc/pglogrepl"
)

func TestFileStoreRoundTrip(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "checkpoint.json")
	s := NewFileStore(path)
	ctx := context.Background()

	if _, err := s.Load(ctx); !errors.Is(err, ErrNotFound) {
		t.Fatalf("Load before Save: err = %v, want ErrNotFound", err)
	}
	cp := testCheckpoint()
	if err := s.Save(ctx, cp); err != nil {
		t.Fatal(err)
	}
	got, err := s.Load(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if got != cp {
		t.Errorf("Load = %+v, want %+v", got, cp)
	}

	cp.LSN += 100
	if err := s.Save(ctx, cp); err != nil {
		t.Fatal(err)
	}
	// A fresh store reads what the previous one wrote, as after a restart.
	got, err = NewFileStore(path).Load(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if got.LSN != cp.LSN {
		t.Errorf("Load after overwrite: LSN = %s, want %s", got.LSN, cp.LSN)
	}

	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 1 || entries[0].Name() != "checkpoint.json" {
		var names []string
		for _, e := range entries {
			names = append(names, e.Name())
		}
		t.Errorf("directory holds %v, want only checkpoint.json (no temporary files left behind)", names)
	}
	info, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if perm := info.Mode().Perm(); perm != 0o600 {
		t.Errorf("mode = %v, want 0600", perm)
	}
	if s.String() != "file:"+path {
		t.Errorf("String() = %q", s.String())
	}
}

func TestFileStoreCorrupt(t *testing.T) {
	tests := []struct {
		name    string
		content string
		wantErr string
	}{
		{name: "empty", content: "", wantErr: "it is empty"},
		{name: "blank", content: " \n", wantErr: "it is empty"},
		{name: "garbage", content: "\x00\x01garbage", wantErr: "invalid character"},
		{name: "truncated", content: `{"lsn":"0/1`, wantErr: "unexpected end of JSON input"},
		{name: "bad lsn", content: `{"lsn":"zz"}`, wantErr: `invalid lsn "zz"`},
		{name: "no lsn", content: `{}`, wantErr: "checkpoint has no lsn"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "cp.json")
			if err := os.WriteFile(path, []byte(tt.content), 0o600); err != nil {
				t.Fatal(err)
			}
			_, err := NewFileStore(path).Load(context.Background())
			if err == nil {
				t.Fatal("Load of a corrupt file succeeded")
			}
			if errors.Is(err, ErrNotFound) || !errors.Is(err, ErrCorrupt) {
				t.Errorf("corrupt file: err %v, want one matching ErrCorrupt (and not ErrNotFound)", err)
			}
			for _, want := range []string{path, tt.wantErr, "rm " + path, "restore it from a backup"} {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("err %q does not contain %q", err, want)
				}
			}
		})
	}
}

func TestFileStoreSaveFailureKeepsOldCheckpoint(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "missing", "cp.json")
	err := NewFileStore(path).Save(ctx, testCheckpoint())
	if err == nil || !strings.Contains(err.Error(), "save checkpoint") || !strings.Contains(err.Error(), filepath.Dir(path)) {
		t.Errorf("Save into a missing directory: err = %v, want one naming the directory", err)
	}

	// A path that is a directory cannot be replaced by rename: the old
	// content stays and no temporary file is left.
	dir := t.TempDir()
	target := filepath.Join(dir, "cp.json")
	if err := os.Mkdir(target, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := NewFileStore(target).Save(ctx, testCheckpoint()); err == nil {
		t.Fatal("Save over a directory succeeded")
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 1 {
		t.Errorf("directory holds %d entries after a failed Save, want 1 (temporary file removed)", len(entries))
	}
}

func TestFileStoreCancelledContext(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	path := filepath.Join(t.TempDir(), "cp.json")
	if err := NewFileStore(path).Save(ctx, Checkpoint{LSN: pglogrepl.LSN(1)}); !errors.Is(err, context.Canceled) {
		t.Errorf("Save: err = %v, want context.Canceled", err)
	}
	if _, err := os.Stat(path); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("cancelled Save wrote the file")
	}
}
