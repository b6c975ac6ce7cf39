package cliconfig

import (
	"io"
	"strings"
	"testing"

	"github.com/spf13/cobra"
)

// testTree is a root with a command taking --nats-url and --retention,
// and one taking only --slot and the command-line-only --yes.
func testTree() (root, run, drop *cobra.Command) {
	root = &cobra.Command{Use: "outboxd", SilenceErrors: true, SilenceUsage: true}
	root.SetFlagErrorFunc(FlagError)
	root.SetOut(io.Discard)
	root.SetErr(io.Discard)
	noop := func(*cobra.Command, []string) error { return nil }
	run = &cobra.Command{Use: "run", RunE: noop}
	run.Flags().String("nats-url", "", "")
	run.Flags().String("retention", "", "")
	run.Flags().Int("max-in-flight", 0, "")
	drop = &cobra.Command{Use: "drop", RunE: noop}
	drop.Flags().String("slot", "", "")
	drop.Flags().Bool("yes", false, "")
	CommandLineOnly(drop.Flags(), "yes")
	slot := &cobra.Command{Use: "slot"}
	slot.AddCommand(drop)
	root.AddCommand(run, slot)
	return root, run, drop
}

// TestFlagError: through a real cobra tree, an unknown flag says which
// was meant, or which command takes it.
func TestFlagError(t *testing.T) {
	tests := []struct {
		args []string
		want []string
	}{
		{[]string{"run", "--nats-urll", "x"}, []string{"unknown flag: --nats-urll", "did you mean --nats-url?", "outboxd run --help"}},
		{[]string{"run", "--max_in_flight=3"}, []string{"did you mean --max-in-flight?"}},
		{[]string{"slot", "drop", "--retention", "1h"}, []string{"--retention is a flag of outboxd run, not of outboxd slot drop"}},
		{[]string{"run", "--completely-unknown"}, []string{"unknown flag: --completely-unknown", "(outboxd run --help lists its flags)"}},
		{[]string{"slot", "drop", "-x"}, []string{"unknown shorthand flag"}},
	}
	for _, tt := range tests {
		root, _, _ := testTree()
		root.SetArgs(tt.args)
		err := root.Execute()
		if err == nil {
			t.Errorf("%q: no error", tt.args)
			continue
		}
		for _, want := range tt.want {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("%q: error %q lacks %q", tt.args, err, want)
			}
		}
	}
}

// TestCheckEnvNames: a variable that sets nothing but is near a setting is
// an error naming the one meant; settings of any command, --config, a
// command-line-only flag's name and variables far from every setting
// (other tools' OUTBOXD_TEST_*) pass.
func TestCheckEnvNames(t *testing.T) {
	root, _, _ := testTree()
	tests := []struct {
		environ []string
		want    []string // nil: no error
	}{
		{[]string{"OUTBOXD_NATS_URL=nats://x", "OUTBOXD_SLOT=s", "OUTBOXD_CONFIG=f.yaml", "OUTBOXD_YES=true", "PATH=/bin"}, nil},
		{[]string{"OUTBOXD_TEST_PG_URL=postgres://x", "OUTBOXD_CHAOS_KILLS=3", "OUTBOX_NATS_UR=x"}, nil},
		{[]string{"OUTBOXD_NATS_UR=nats://x"}, []string{"OUTBOXD_NATS_UR sets nothing", "did you mean OUTBOXD_NATS_URL?"}},
		{[]string{"OUTBOXD_MAX_INFLIGHT=3"}, []string{"did you mean OUTBOXD_MAX_IN_FLIGHT?", "--max-in-flight is OUTBOXD_MAX_IN_FLIGHT"}},
		{[]string{"OUTBOXD_SOLT=x"}, []string{"did you mean OUTBOXD_SLOT?"}},
	}
	for _, tt := range tests {
		err := checkEnvNames(tt.environ, root)
		if tt.want == nil {
			if err != nil {
				t.Errorf("%q: %v, want no error", tt.environ, err)
			}
			continue
		}
		if err == nil {
			t.Errorf("%q: no error, want %q", tt.environ, tt.want)
			continue
		}
		for _, want := range tt.want {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("%q: error %q lacks %q", tt.environ, err, want)
			}
		}
	}
}

// TestApplyChecksEnv: Apply refuses a misspelt variable before it reads
// anything else.
func TestApplyChecksEnv(t *testing.T) {
	_, run, _ := testTree()
	t.Setenv("OUTBOXD_NATS_UR", "nats://x")
	if err := Apply(run, nil); err == nil || !strings.Contains(err.Error(), "OUTBOXD_NATS_URL") {
		t.Errorf("Apply = %v, want the misspelt variable named", err)
	}
}
