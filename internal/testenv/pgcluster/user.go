package pgcluster

import (
	"errors"
	"fmt"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// serverUser is who runs initdb and postgres. A nil *serverUser means the
// caller itself, which is the case unless the caller is root.
type serverUser struct {
	name     string
	uid, gid uint32
}

// lookupServerUser returns nil unless the caller is root, because initdb and
// postgres refuse to run as root. Debian's postgresql package creates a
// "postgres" system user; "nobody" exists nearly everywhere else.
func lookupServerUser() (*serverUser, error) {
	if os.Geteuid() != 0 {
		return nil, nil
	}
	for _, name := range []string{"postgres", "nobody"} {
		u, err := user.Lookup(name)
		if err != nil {
			continue
		}
		uid, err1 := strconv.ParseUint(u.Uid, 10, 32)
		gid, err2 := strconv.ParseUint(u.Gid, 10, 32)
		if err := errors.Join(err1, err2); err != nil {
			return nil, fmt.Errorf("user %s: %w", name, err)
		}
		return &serverUser{name: name, uid: uint32(uid), gid: uint32(gid)}, nil
	}
	return nil, errors.New("running as root, which PostgreSQL refuses, and neither a \"postgres\" " +
		"nor a \"nobody\" user exists to run it as: create one (useradd --system postgres)")
}

// procAttr returns the attributes for a child process. Setpgid keeps a
// terminal's Ctrl-C away from the server, so the caller decides when it
// stops; pdeath is the signal the server gets if the caller dies first.
func (u *serverUser) procAttr(pdeath syscall.Signal) *syscall.SysProcAttr {
	a := &syscall.SysProcAttr{Setpgid: true, Pdeathsig: pdeath}
	if u != nil {
		// No Groups: the child drops root's supplementary groups.
		a.Credential = &syscall.Credential{Uid: u.uid, Gid: u.gid}
	}
	return a
}

// own hands dir to the server user and makes sure that user can reach it.
// Folders above dir that the user cannot traverse get o+x when they lie
// under os.TempDir() (t.TempDir() makes its parent 0700); anywhere else that
// is the caller's choice to make, so it is an error.
func (u *serverUser) own(dir string) error {
	if u == nil {
		return nil
	}
	if err := os.Chown(dir, int(u.uid), int(u.gid)); err != nil {
		return err
	}
	tmp := filepath.Clean(os.TempDir())
	for p := filepath.Dir(dir); ; p = filepath.Dir(p) {
		fi, err := os.Stat(p)
		if err != nil {
			return err
		}
		if !u.canTraverse(fi) {
			if !strings.HasPrefix(p, tmp+string(filepath.Separator)) {
				return fmt.Errorf("%s cannot be entered by user %s, who runs PostgreSQL because root may not: "+
					"chmod o+x %s, or choose a Dir elsewhere", p, u.name, p)
			}
			if err := os.Chmod(p, fi.Mode().Perm()|0o001); err != nil {
				return err
			}
		}
		if p == filepath.Dir(p) {
			return nil
		}
	}
}

func (u *serverUser) canTraverse(fi os.FileInfo) bool {
	perm := fi.Mode().Perm()
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		if st.Uid == u.uid {
			return perm&0o100 != 0
		}
		if st.Gid == u.gid {
			return perm&0o010 != 0
		}
	}
	return perm&0o001 != 0
}
