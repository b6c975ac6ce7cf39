package checkpoint

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// FileStore keeps the checkpoint as JSON in one local file. It suits a single
// machine with a persistent disk; use [KVStore] where outboxd may move
// between machines.
type FileStore struct {
	path string
}

// NewFileStore returns a store for the file at path. Nothing is touched until
// Load or Save; the directory must exist.
func NewFileStore(path string) *FileStore {
	return &FileStore{path: path}
}

// String returns "file:" and the path.
func (s *FileStore) String() string { return KindFile + ":" + s.path }

// DeleteCommand returns "rm PATH".
func (s *FileStore) DeleteCommand() string { return "rm " + s.path }

// Load reads the checkpoint. A missing file is ErrNotFound; a file that is
// not a valid checkpoint (empty, say) is a *CorruptError naming the file,
// never a zero checkpoint.
func (s *FileStore) Load(ctx context.Context) (Checkpoint, error) {
	if err := ctx.Err(); err != nil {
		return Checkpoint{}, fmt.Errorf("load checkpoint %s: %w", s.path, err)
	}
	data, err := os.ReadFile(s.path)
	if errors.Is(err, fs.ErrNotExist) {
		return Checkpoint{}, fmt.Errorf("load checkpoint %s: %w", s.path, ErrNotFound)
	}
	if err != nil {
		return Checkpoint{}, fmt.Errorf("load checkpoint: %w", err)
	}
	return decodeStored(data, "file "+s.path, s.DeleteCommand())
}

// Save replaces the file atomically: it writes a temporary file in the same
// directory, fsyncs it, renames it over the checkpoint and fsyncs the
// directory, so after a crash the file holds either the old or the new
// checkpoint, whole. The file is created with mode 0600. ctx is checked
// before writing; file I/O itself cannot be cancelled.
func (s *FileStore) Save(ctx context.Context, cp Checkpoint) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("save checkpoint %s: %w", s.path, err)
	}
	data, err := json.MarshalIndent(cp, "", "  ")
	if err != nil {
		return fmt.Errorf("save checkpoint %s: %w", s.path, err)
	}
	data = append(data, '\n')

	dir := filepath.Dir(s.path)
	f, err := os.CreateTemp(dir, "."+filepath.Base(s.path)+".tmp-*")
	if err != nil {
		return fmt.Errorf("save checkpoint: %w", err)
	}
	tmp := f.Name()
	renamed := false
	defer func() {
		if !renamed {
			_ = f.Close() // may already be closed; the write error is the one to report
			_ = os.Remove(tmp)
		}
	}()

	if _, err := f.Write(data); err != nil {
		return fmt.Errorf("save checkpoint: %w", err)
	}
	if err := f.Sync(); err != nil {
		return fmt.Errorf("save checkpoint: %w", err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("save checkpoint: %w", err)
	}
	if err := os.Rename(tmp, s.path); err != nil {
		return fmt.Errorf("save checkpoint: %w", err)
	}
	renamed = true
	// Without the directory fsync the rename itself may be lost on power
	// failure; report it so the caller does not treat the LSN as durable.
	if err := syncDir(dir); err != nil {
		return fmt.Errorf("save checkpoint %s: sync directory: %w", s.path, err)
	}
	return nil
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	if err := d.Sync(); err != nil {
		_ = d.Close()
		return err
	}
	return d.Close()
}
