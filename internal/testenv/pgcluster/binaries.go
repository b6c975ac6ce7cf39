package pgcluster

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
)

// ErrNoBinaries means no folder holding both initdb and postgres was found.
// The error that wraps it names the folders searched and what to install.
var ErrNoBinaries = errors.New("no PostgreSQL server binaries (initdb, postgres) found")

// debianBinGlob is where Debian and Ubuntu packages put the server binaries,
// which are not on PATH there.
const debianBinGlob = "/usr/lib/postgresql/*/bin"

// findBinDir returns binDir if set, else the folder of initdb on PATH, else
// the newest folder matching glob.
func findBinDir(binDir, glob string) (string, error) {
	if binDir != "" {
		if err := hasServerBinaries(binDir); err != nil {
			return "", fmt.Errorf("BinDir %s: %w", binDir, err)
		}
		return binDir, nil
	}
	if p, err := exec.LookPath("initdb"); err == nil {
		if dir := filepath.Dir(p); hasServerBinaries(dir) == nil {
			return dir, nil
		}
	}
	dirs, _ := filepath.Glob(glob) // the only error is a bad pattern
	sort.Slice(dirs, func(i, j int) bool { return versionLess(dirs[j], dirs[i]) })
	for _, dir := range dirs {
		if hasServerBinaries(dir) == nil {
			return dir, nil
		}
	}
	return "", fmt.Errorf("%w: searched PATH (%s) and %s; install them with "+
		"\"apt-get install postgresql-15\" or put the folder "+
		"holding initdb and postgres on PATH", ErrNoBinaries, os.Getenv("PATH"), glob)
}

func hasServerBinaries(dir string) error {
	for _, name := range []string{"initdb", "postgres"} {
		fi, err := os.Stat(filepath.Join(dir, name))
		if err != nil {
			return fmt.Errorf("%w: %v", ErrNoBinaries, err)
		}
		if fi.IsDir() || fi.Mode()&0o111 == 0 {
			return fmt.Errorf("%w: %s is not executable", ErrNoBinaries, filepath.Join(dir, name))
		}
	}
	return nil
}

// versionLess orders ".../9.6/bin" before ".../15/bin" (numerically, not as
// strings), by the path element above "bin".
func versionLess(a, b string) bool {
	va, vb := versionOf(a), versionOf(b)
	for i := 0; i < len(va) && i < len(vb); i++ {
		if va[i] != vb[i] {
			return va[i] < vb[i]
		}
	}
	if len(va) != len(vb) {
		return len(va) < len(vb)
	}
	return a < b
}

func versionOf(binDir string) []int {
	var v []int
	for _, part := range strings.Split(filepath.Base(filepath.Dir(binDir)), ".") {
		n, err := strconv.Atoi(part)
		if err != nil {
			return v
		}
		v = append(v, n)
	}
	return v
}

// Supported majors: the ones outboxd is tested on.
const (
	OldestMajor = 14
	NewestMajor = 18
)

// installDirs are where scripts/ensure-postgres MAJOR unpacks the npm
// builds, each holding MAJOR/bin: $OUTBOXD_PG_INSTALL_DIR if set, else
// /opt/outboxd/postgresql (as root) and ~/.local/share/outboxd/postgresql.
func installDirs() []string {
	if dir := os.Getenv("OUTBOXD_PG_INSTALL_DIR"); dir != "" {
		return []string{dir}
	}
	dirs := []string{"/opt/outboxd/postgresql"}
	if home, err := os.UserHomeDir(); err == nil {
		dirs = append(dirs, filepath.Join(home, ".local", "share", "outboxd", "postgresql"))
	}
	return dirs
}

// BinDirFor returns the folder holding the server binaries of PostgreSQL
// major: Debian's /usr/lib/postgresql/MAJOR/bin, else where
// scripts/ensure-postgres MAJOR installs them. The error, wrapping
// ErrNoBinaries, names the folders searched and the command that installs
// them.
func BinDirFor(major int) (string, error) {
	return binDirFor(major, "/usr/lib/postgresql", installDirs())
}

func binDirFor(major int, debianRoot string, installDirs []string) (string, error) {
	if major < OldestMajor || major > NewestMajor {
		return "", fmt.Errorf("PostgreSQL %d: outboxd is tested on %d to %d; choose one of those", major, OldestMajor, NewestMajor)
	}
	searched := []string{filepath.Join(debianRoot, strconv.Itoa(major), "bin")}
	for _, dir := range installDirs {
		searched = append(searched, filepath.Join(dir, strconv.Itoa(major), "bin"))
	}
	for _, dir := range searched {
		if hasServerBinaries(dir) == nil {
			return dir, nil
		}
	}
	return "", fmt.Errorf("%w for PostgreSQL %d: searched %s; install them with \"scripts/ensure-postgres %d\"",
		ErrNoBinaries, major, strings.Join(searched, ", "), major)
}
