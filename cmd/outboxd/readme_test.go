package main

import (
	"flag"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/spf13/pflag"
)

// updateReadme rewrites the generated parts of README.md:
//
//	go test ./cmd/outboxd -run TestReadmeReference -update
var updateReadme = flag.Bool("update", false, "rewrite the generated configuration reference in README.md")

const readmePath = "../../README.md"

// referenceCommands are the commands whose settings README.md documents in
// generated tables (status and slot take run's settings).
var referenceCommands = []string{"run", "migrate", "demo"}

// referenceMarkers are the comments that enclose command's generated table.
func referenceMarkers(command string) (begin, end string) {
	return fmt.Sprintf("<!-- BEGIN generated reference: outboxd %s (go test ./cmd/outboxd -run TestReadmeReference -update) -->", command),
		fmt.Sprintf("<!-- END generated reference: outboxd %s -->", command)
}

// referenceTable is the Markdown table of a command's settings: flag,
// environment variable, config file key, default and meaning, all from
// the flag definitions. Hidden flags (benchmarks only) are left out.
func referenceTable(t testing.TB, command string) string {
	t.Helper()
	cmd, _, err := newRootCommand().Find([]string{command})
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	b.WriteString("| flag | environment | config key | default | meaning |\n|---|---|---|---|---|\n")
	cmd.Flags().VisitAll(func(f *pflag.Flag) {
		if f.Name == "help" || f.Hidden {
			return
		}
		key := "`" + f.Name + "`"
		if f.Name == configFlag {
			key = "—"
		}
		def := "none"
		if f.DefValue != "" {
			def = "`" + f.DefValue + "`"
		}
		usage := strings.TrimSuffix(f.Usage, fmt.Sprintf(" (env %s)", envName(f.Name)))
		usage = strings.ReplaceAll(usage, "|", `\|`)
		fmt.Fprintf(&b, "| `--%s` | `%s` | %s | %s | %s |\n", f.Name, envName(f.Name), key, def, usage)
	})
	return b.String()
}

// TestReadmeReference fails when README.md's configuration reference and
// the flags disagree. With -update it rewrites the reference instead.
func TestReadmeReference(t *testing.T) {
	data, err := os.ReadFile(readmePath)
	if err != nil {
		t.Fatal(err)
	}
	readme := string(data)
	for _, command := range referenceCommands {
		begin, end := referenceMarkers(command)
		i, j := strings.Index(readme, begin), strings.Index(readme, end)
		if i < 0 || j < i {
			t.Fatalf("README.md lacks the markers of outboxd %s's reference, in this order:\n%s\n%s", command, begin, end)
		}
		want := begin + "\n" + referenceTable(t, command) + end
		if got := readme[i : j+len(end)]; got != want {
			if *updateReadme {
				readme = readme[:i] + want + readme[j+len(end):]
				continue
			}
			t.Errorf("README.md's reference of outboxd %s differs from its flags; regenerate it with\n"+
				"  go test ./cmd/outboxd -run TestReadmeReference -update\nand commit README.md. Want:\n%s", command, want)
		}
	}
	if *updateReadme {
		if err := os.WriteFile(readmePath, []byte(readme), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}
