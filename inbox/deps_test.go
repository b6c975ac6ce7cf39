package inbox_test

import (
	"os/exec"
	"strings"
	"testing"
)

// allowedModules are the modules package inbox may link: pgx and nats.go
// and what they require themselves. An application that imports inbox
// gets these and nothing of the daemon's (zerolog, cobra, nats-server).
// When a pgx or nats.go upgrade brings a new module, add it here after
// checking that it is theirs.
var allowedModules = map[string]bool{
	"github.com/jackc/pgx/v5":        true,
	"github.com/jackc/pgpassfile":    true,
	"github.com/jackc/pgservicefile": true,
	"github.com/jackc/puddle/v2":     true, // pgxpool
	"github.com/nats-io/nats.go":     true,
	"github.com/nats-io/nkeys":       true,
	"github.com/nats-io/nuid":        true,
	"github.com/klauspost/compress":  true,
	"golang.org/x/crypto":            true,
	"golang.org/x/sync":              true,
	"golang.org/x/sys":               true,
	"golang.org/x/text":              true,
	"github.com/outboxd/outboxd":     true, // package inbox itself only: see below
	"":                               true, // the standard library
}

// allowedImports are the prefixes of what package inbox imports itself.
var allowedImports = []string{"github.com/jackc/pgx/v5", "github.com/nats-io/nats.go"}

// TestImports keeps package inbox importable without the daemon: it may
// import only the standard library, pgx and nats.go, and link only their
// modules, so that `go get github.com/outboxd/outboxd/inbox` costs an
// application nothing else.
func TestImports(t *testing.T) {
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command on PATH to list the package's dependencies")
	}
	list := func(args ...string) []string {
		out, err := exec.Command(goTool, append([]string{"list"}, args...)...).Output()
		if err != nil {
			t.Fatalf("go list %s: %v", strings.Join(args, " "), err)
		}
		return strings.Fields(string(out))
	}

	for _, imp := range list("-f", `{{join .Imports " "}}`, ".") {
		if !strings.Contains(strings.Split(imp, "/")[0], ".") {
			continue // standard library
		}
		ok := false
		for _, prefix := range allowedImports {
			ok = ok || imp == prefix || strings.HasPrefix(imp, prefix+"/")
		}
		if !ok {
			t.Errorf("package inbox imports %s: use only the standard library, %s", imp, strings.Join(allowedImports, " and "))
		}
	}

	// One line per package: "path module" (module empty for std).
	out := list("-deps", "-f", `{{.ImportPath}}|{{with .Module}}{{.Path}}{{end}}`, ".")
	for _, line := range out {
		path, module, _ := strings.Cut(line, "|")
		if !allowedModules[module] {
			t.Errorf("package inbox links %s of module %s: only pgx, nats.go and their own dependencies are allowed", path, module)
		}
		if module == "github.com/outboxd/outboxd" && path != "github.com/outboxd/outboxd/inbox" {
			t.Errorf("package inbox links %s: it must not depend on outboxd's other packages", path)
		}
	}
}
