package main

import (
	"flag"
	"fmt"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/outboxd/outboxd/internal/cliconfig"
	"github.com/outboxd/outboxd/internal/telemetry"
	"github.com/outboxd/outboxd/sink"
)

// updateReadme rewrites the generated parts of docs/configuration.md:
//
//	go test ./cmd/outboxd -run TestReadmeReference -update
var updateReadme = flag.Bool("update", false, "rewrite the generated configuration reference in docs/configuration.md")

// The user documentation in docs/ that these tests keep true: the
// configuration reference and the operations guide with its runbook.
const (
	configurationPath = "../../docs/configuration.md"
	operationsPath    = "../../docs/operations.md"
)

// referenceCommands are the commands whose settings docs/configuration.md documents
// in generated tables: every command with flags of its own. A command
// that takes run's settings documents only the flags run lacks.
// Subcommands are named by their path ("slot drop").
func referenceCommands(t testing.TB) []string {
	t.Helper()
	var names []string
	var walk func(cmd *cobra.Command, prefix string)
	walk = func(cmd *cobra.Command, prefix string) {
		for _, sub := range cmd.Commands() {
			name := strings.TrimSpace(prefix + " " + sub.Name())
			if len(referenceFlags(t, name)) > 0 {
				names = append(names, name)
			}
			walk(sub, name)
		}
	}
	walk(newRootCommand(), "")
	return names
}

// referenceMarkers are the comments that enclose command's generated table.
func referenceMarkers(command string) (begin, end string) {
	return fmt.Sprintf("<!-- BEGIN generated reference: outboxd %s (go test ./cmd/outboxd -run TestReadmeReference -update) -->", command),
		fmt.Sprintf("<!-- END generated reference: outboxd %s -->", command)
}

// referenceFlags are the flags of command its table lists: not hidden
// (benchmarks only), and not run's when the command takes run's settings.
func referenceFlags(t testing.TB, command string) []*pflag.Flag {
	t.Helper()
	root := newRootCommand()
	cmd, _, err := root.Find(strings.Fields(command))
	if err != nil {
		t.Fatal(err)
	}
	run, _, err := root.Find([]string{"run"})
	if err != nil {
		t.Fatal(err)
	}
	var flags []*pflag.Flag
	cmd.Flags().VisitAll(func(f *pflag.Flag) {
		if f.Name == "help" || f.Hidden {
			return
		}
		if command != "run" && cmd.Annotations[runSettingsAnnotation] != "" && run.Flags().Lookup(f.Name) != nil {
			return
		}
		flags = append(flags, f)
	})
	return flags
}

// referenceTable is the Markdown reference of a command's settings: for
// run, a table per group of its --help; for a command that takes some of
// run's settings, which; then its own flags. Each table row has the flag,
// environment variable, config file key, default and meaning, all from the
// flag definitions.
func referenceTable(t testing.TB, command string) string {
	t.Helper()
	flags := referenceFlags(t, command)
	if command != "run" {
		return takesRunSettings(t, command) + flagTable(flags)
	}
	fs := pflag.NewFlagSet("run", pflag.ContinueOnError)
	for _, f := range flags {
		fs.AddFlag(f)
	}
	var b strings.Builder
	for i, g := range groupedFlagUsages(fs) {
		if i > 0 {
			b.WriteString("\n")
		}
		fmt.Fprintf(&b, "**%s**\n\n", g.title)
		var group []*pflag.Flag
		for _, name := range g.flags {
			group = append(group, fs.Lookup(name))
		}
		b.WriteString(flagTable(group))
	}
	return b.String()
}

// takesRunSettings is the line that says which of run's settings a
// command takes, or "" for none.
func takesRunSettings(t testing.TB, command string) string {
	t.Helper()
	root := newRootCommand()
	cmd, _, err := root.Find(strings.Fields(command))
	if err != nil {
		t.Fatal(err)
	}
	if cmd.Annotations[runSettingsAnnotation] == "" {
		return ""
	}
	run, _, _ := root.Find([]string{"run"})
	var taken, left []string
	run.Flags().VisitAll(func(f *pflag.Flag) {
		if f.Hidden || f.Name == "help" || f.Name == cliconfig.ConfigFlag {
			return
		}
		if cmd.Flags().Lookup(f.Name) != nil {
			taken = append(taken, "`--"+f.Name+"`")
		} else {
			left = append(left, "`--"+f.Name+"`")
		}
	})
	switch {
	case len(left) == 0:
		return "Takes every setting of `outboxd run`, and:\n\n"
	case len(left) < len(taken):
		return "Takes the settings of `outboxd run` except " + strings.Join(left, ", ") + "; and:\n\n"
	}
	return "Takes these settings of `outboxd run`: " + strings.Join(taken, ", ") + "; and:\n\n"
}

// flagTable is the Markdown table of flags.
func flagTable(flags []*pflag.Flag) string {
	var b strings.Builder
	b.WriteString("| flag | environment | config key | default | meaning |\n|---|---|---|---|---|\n")
	for _, f := range flags {
		env, key := "`"+cliconfig.EnvName(f.Name)+"`", "`"+f.Name+"`"
		if f.Name == cliconfig.ConfigFlag {
			key = "—"
		}
		if cliconfig.IsCommandLineOnly(f) {
			env, key = "—", "—"
		}
		def := "none"
		if f.DefValue != "" {
			def = "`" + strings.ReplaceAll(f.DefValue, "|", `\|`) + "`"
		}
		usage := strings.TrimSuffix(f.Usage, fmt.Sprintf(" (env %s)", cliconfig.EnvName(f.Name)))
		usage = strings.ReplaceAll(usage, "|", `\|`)
		fmt.Fprintf(&b, "| `--%s` | %s | %s | %s | %s |\n", f.Name, env, key, def, usage)
	}
	return b.String()
}

// TestReadmeReference fails when the configuration reference in
// docs/configuration.md and the flags disagree. With -update it rewrites
// the reference instead.
func TestReadmeReference(t *testing.T) {
	data, err := os.ReadFile(configurationPath)
	if err != nil {
		t.Fatal(err)
	}
	doc := string(data)
	for _, command := range referenceCommands(t) {
		begin, end := referenceMarkers(command)
		i, j := strings.Index(doc, begin), strings.Index(doc, end)
		if i < 0 || j < i {
			t.Fatalf("docs/configuration.md lacks the markers of outboxd %s's reference: put these two lines where its table belongs,\n"+
				"then run go test ./cmd/outboxd -run TestReadmeReference -update\n%s\n%s", command, begin, end)
		}
		want := begin + "\n" + referenceTable(t, command) + end
		if got := doc[i : j+len(end)]; got != want {
			if *updateReadme {
				doc = doc[:i] + want + doc[j+len(end):]
				continue
			}
			t.Errorf("docs/configuration.md's reference of outboxd %s differs from its flags; regenerate it with\n"+
				"  go test ./cmd/outboxd -run TestReadmeReference -update\nand commit docs/configuration.md. Want:\n%s", command, want)
		}
	}
	if *updateReadme {
		if err := os.WriteFile(configurationPath, []byte(doc), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// docSection is the text of the Markdown file at path from heading to the
// next heading of the same or a higher level.
func docSection(t testing.TB, path, heading string) string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	doc := string(data)
	i := strings.Index(doc, "\n"+heading+"\n")
	if i < 0 {
		t.Fatalf("%s has no %q", path, heading)
	}
	level := strings.Index(heading, " ") // "### X" → 3
	rest := doc[i+len(heading)+2:]
	for _, line := range strings.SplitAfter(rest, "\n") {
		if n := strings.Index(line, " "); n > 0 && n <= level && strings.Trim(line[:n], "#") == "" {
			return rest[:strings.Index(rest, line)]
		}
	}
	return rest
}

var (
	metricNameRe     = regexp.MustCompile(`\boutboxd_[a-z_]+`)
	codeBlockRe      = regexp.MustCompile("(?s)```sh\n(.*?)```")
	commandInBlockRe = regexp.MustCompile(`(?m)(?:^|[;&|] *)(?:\S+=\S+ )*outboxd ([a-z]+)`)
	reasonRe         = regexp.MustCompile("`(timeout|no_responders|disconnected|wrong_last_sequence|rejected|other|[a-z_]+)` \\(")
)

// TestReadmeRunbook: the runbook in docs/operations.md has its entries,
// each with symptoms, causes and commands, and names only metrics outboxd
// exports, publish error reasons it reports, and commands it has.
func TestReadmeRunbook(t *testing.T) {
	runbook := docSection(t, operationsPath, "## Runbook")
	for _, entry := range []string{"Lag growing", "Slot retaining WAL", "Standby never takes over", "Stream rejects publishes",
		"Database restored from a copy", "Publication dropped", "Checkpoint does not decode"} {
		text := docSection(t, operationsPath, "### "+entry)
		for _, part := range []string{"**Symptoms.**", "**Causes", "**Commands.**", "```sh"} {
			if !strings.Contains(text, part) {
				t.Errorf("runbook entry %q has no %s", entry, part)
			}
		}
	}

	m := telemetry.NewMetrics("OUTBOX")
	telemetry.NewHealth(m)
	families, err := m.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	exported := map[string]bool{}
	for _, f := range families {
		exported[f.GetName()] = true
	}
	for _, name := range metricNameRe.FindAllString(runbook, -1) {
		base := strings.TrimSuffix(strings.TrimSuffix(strings.TrimSuffix(name, "_bucket"), "_sum"), "_count")
		if !exported[base] {
			t.Errorf("the runbook cites %s, which outboxd does not export", name)
		}
	}
	_, after, _ := strings.Cut(docSection(t, operationsPath, "### Stream rejects publishes"), "by `reason`:")
	reasons, _, _ := strings.Cut(after, "Meanwhile")
	cited := reasonRe.FindAllStringSubmatch(reasons, -1)
	if len(cited) == 0 {
		t.Error("the runbook's stream entry cites no publish error reason")
	}
	for _, r := range cited {
		if !slices.Contains(sink.Reasons, r[1]) {
			t.Errorf("the runbook cites reason %q; outboxd reports %v", r[1], sink.Reasons)
		}
	}
	var blocks strings.Builder
	for _, b := range codeBlockRe.FindAllStringSubmatch(runbook, -1) {
		blocks.WriteString(b[1])
	}
	for _, c := range commandInBlockRe.FindAllStringSubmatch(blocks.String(), -1) {
		if cmd, _, err := newRootCommand().Find([]string{c[1]}); err != nil || cmd.Name() != c[1] {
			t.Errorf("the runbook runs `outboxd %s`, which is no command", c[1])
		}
	}
	if !strings.Contains(docSection(t, operationsPath, "## Running under systemd"), "(../scripts/outboxd.service)") {
		t.Error("docs/operations.md does not link scripts/outboxd.service")
	}
}
