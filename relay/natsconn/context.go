package natsconn

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
)

// Context is the part of a `nats` CLI context file outboxd reads
// (~/.config/nats/context/NAME.json); other fields are ignored.
type Context struct {
	URL      string `json:"url"`
	User     string `json:"user"`
	Password string `json:"password"`
	Creds    string `json:"creds"`
	Nkey     string `json:"nkey"`
	Token    string `json:"token"`
	Cert     string `json:"cert"`
	Key      string `json:"key"`
	CA       string `json:"ca"`
}

// contextNameRe is what a context name may be: the nats CLI keeps each one
// as a file in one folder, so no path separators.
var contextNameRe = regexp.MustCompile(`^[A-Za-z0-9_.-]+$`)

// ContextPath is where the nats CLI keeps context name.
func ContextPath(name string) (string, error) {
	dir := os.Getenv("XDG_CONFIG_HOME")
	if dir == "" {
		home, err := os.UserHomeDir()
		if err != nil {
			return "", fmt.Errorf("--nats-context %q: find the home folder: %w", name, err)
		}
		dir = filepath.Join(home, ".config")
	}
	return filepath.Join(dir, "nats", "context", name+".json"), nil
}

// LoadContext reads context name. Its errors never quote the file's
// content, which holds secrets.
func LoadContext(name string) (Context, error) {
	var ctx Context
	if !contextNameRe.MatchString(name) || name == "." || name == ".." {
		return ctx, fmt.Errorf("--nats-context %q is not a context name: use letters, digits, '.', '_' or '-' (as `nats context ls` lists them)", name)
	}
	path, err := ContextPath(name)
	if err != nil {
		return ctx, err
	}
	data, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return ctx, fmt.Errorf("--nats-context %q: %s does not exist: create it with `nats context save %s` or fix the name", name, path, name)
	}
	if err != nil {
		return ctx, fmt.Errorf("--nats-context %q: %w", name, err)
	}
	if err := json.Unmarshal(data, &ctx); err != nil {
		var syntax *json.SyntaxError
		var typeErr *json.UnmarshalTypeError
		switch {
		case errors.As(err, &syntax):
			return ctx, fmt.Errorf("--nats-context %q: %s is not valid JSON (at byte %d)", name, path, syntax.Offset)
		case errors.As(err, &typeErr):
			return ctx, fmt.Errorf("--nats-context %q: %s: field %q must be a %s", name, path, typeErr.Field, typeErr.Type)
		default:
			return ctx, fmt.Errorf("--nats-context %q: %s is not a nats context file", name, path)
		}
	}
	for _, p := range []*string{&ctx.Creds, &ctx.Nkey, &ctx.Cert, &ctx.Key, &ctx.CA} {
		*p = expandHome(*p)
	}
	return ctx, nil
}

// expandHome replaces a leading ~/ by the home folder, as the nats CLI does
// for the paths in a context.
func expandHome(p string) string {
	if rest, ok := strings.CutPrefix(p, "~/"); ok {
		if home, err := os.UserHomeDir(); err == nil {
			return filepath.Join(home, rest)
		}
	}
	return p
}
