package main

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"debug/elf"
	"debug/macho"
	"encoding/hex"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
)

// The stamp the release test builds with, as a release would.
var releaseEnv = []string{"VERSION=v9.9.9-test", "COMMIT=0123456789ab", "DATE=2026-12-05T12:00:00Z"}

// TestRelease builds the release as scripts/release does and checks what
// a user downloads: every platform, the checksums, the same bytes as the
// Dockerfile's build command, and a linux binary that runs on a bare root
// file system without libc, as a non-root user.
func TestRelease(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: the release cross-compiles three platforms")
	}
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	dist := t.TempDir()
	run(t, root, releaseEnv, "bash", "scripts/release", dist)
	names := map[string]string{
		"linux/amd64": "outboxd-v9.9.9-test-linux-amd64", "linux/arm64": "outboxd-v9.9.9-test-linux-arm64",
		"darwin/arm64": "outboxd-v9.9.9-test-darwin-arm64",
	}

	t.Run("platforms", func(t *testing.T) {
		for platform, name := range names {
			checkPlatform(t, filepath.Join(dist, name), platform)
		}
	})
	t.Run("checksums", func(t *testing.T) {
		sums := readSums(t, filepath.Join(dist, "SHA256SUMS"))
		if len(sums) != len(names) {
			t.Errorf("SHA256SUMS lists %d files, want %d: %v", len(sums), len(names), sums)
		}
		for _, name := range names {
			if got := sha256File(t, filepath.Join(dist, name)); sums[name] != got {
				t.Errorf("SHA256SUMS says %s of %s, the file is %s", sums[name], name, got)
			}
		}
	})
	t.Run("same binary as the Dockerfile", func(t *testing.T) {
		out := filepath.Join(t.TempDir(), "outboxd")
		cmd := dockerfileBuild(t, filepath.Join(root, "Dockerfile"), out)
		run(t, root, append(releaseEnv, "TARGETOS=linux", "TARGETARCH=amd64"), "sh", "-c", cmd)
		if a, b := sha256File(t, out), sha256File(t, filepath.Join(dist, names["linux/amd64"])); a != b {
			t.Errorf("the Dockerfile's build command made %s, the release %s: not the same binary", a, b)
		}
	})
	t.Run("bare root as non-root", func(t *testing.T) {
		bin := filepath.Join(dist, names["linux/amd64"])
		if !strings.Contains(runtimeGOARCH(t), "amd64") {
			t.Skipf("this machine is %s: the linux/amd64 binary cannot run here", runtimeGOARCH(t))
		}
		runInBareRoot(t, bin)
	})
}

// checkPlatform opens the binary as its platform's executable format; a
// linux binary must be static (no program interpreter: no libc needed).
func checkPlatform(t *testing.T, path, platform string) {
	t.Helper()
	goos, goarch, _ := strings.Cut(platform, "/")
	if goos == "darwin" {
		f, err := macho.Open(path)
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		defer f.Close()
		if f.Cpu != macho.CpuArm64 {
			t.Errorf("%s: CPU %s, want arm64", path, f.Cpu)
		}
		return
	}
	f, err := elf.Open(path)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	defer f.Close()
	want := map[string]elf.Machine{"amd64": elf.EM_X86_64, "arm64": elf.EM_AARCH64}[goarch]
	if f.Machine != want {
		t.Errorf("%s: machine %s, want %s", path, f.Machine, want)
	}
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			t.Errorf("%s has a program interpreter: it is not static", path)
		}
	}
}

// dockerfileBuild is the Dockerfile's command that builds outboxd (its
// RUN line calling scripts/build), with the output moved to out and the
// build arguments left to the environment.
func dockerfileBuild(t *testing.T, dockerfile, out string) string {
	t.Helper()
	data, err := os.ReadFile(dockerfile)
	if err != nil {
		t.Fatal(err)
	}
	var found []string
	for _, line := range strings.Split(string(data), "\n") {
		if cmd, ok := strings.CutPrefix(line, "RUN "); ok && strings.Contains(cmd, "scripts/build") {
			found = append(found, cmd)
		}
	}
	if len(found) != 1 {
		t.Fatalf("Dockerfile has %d RUN lines calling scripts/build, want 1: %q", len(found), found)
	}
	if !strings.Contains(found[0], "/out/outboxd") {
		t.Fatalf("the Dockerfile's build %q does not write /out/outboxd, which the image copies", found[0])
	}
	return strings.Replace(found[0], "/out/outboxd", out, 1)
}

// runInBareRoot runs the binary in a chroot that holds nothing else, as
// user nobody: version, --version and config (which needs no server) work.
func runInBareRoot(t *testing.T, bin string) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("chroot needs root; CI runs as root")
	}
	jail := t.TempDir()
	if err := os.Chmod(jail, 0o755); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(bin)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(jail, "outboxd"), data, 0o755); err != nil {
		t.Fatal(err)
	}
	const nobody = 65534
	for _, args := range [][]string{{"version"}, {"--version"}, {"config"}} {
		cmd := exec.Command("/outboxd", args...)
		cmd.Env = []string{"OUTBOXD_PG_URL=postgres://outboxd@db:5432/app"}
		cmd.Dir = "/"
		cmd.SysProcAttr = &syscall.SysProcAttr{Chroot: jail, Credential: &syscall.Credential{Uid: nobody, Gid: nobody}}
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		if err := cmd.Run(); err != nil {
			t.Fatalf("outboxd %s in a bare root as uid %d: %v\n%s", args[0], nobody, err, out.String())
		}
		want := "outboxd v9.9.9-test (commit 0123456789ab, built 2026-12-05T12:00:00Z, go"
		if args[0] == "config" {
			want = "postgres://outboxd@db:5432/app"
		}
		if !strings.Contains(out.String(), want) {
			t.Errorf("outboxd %s printed %q, want %q in it", args[0], out.String(), want)
		}
	}
}

func runtimeGOARCH(t *testing.T) string {
	t.Helper()
	out, err := exec.Command("go", "env", "GOARCH").Output()
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(out))
}

// run runs name in dir with env added, failing t with its output.
func run(t *testing.T, dir string, env []string, name string, args ...string) {
	t.Helper()
	cmd := exec.Command(name, args...)
	cmd.Dir, cmd.Env = dir, append(os.Environ(), env...)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
}

var sumLineRe = regexp.MustCompile(`^([0-9a-f]{64})  (\S+)$`)

// readSums reads a sha256sum file: file name to checksum.
func readSums(t *testing.T, path string) map[string]string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sums := map[string]string{}
	lines := bufio.NewScanner(f)
	for lines.Scan() {
		m := sumLineRe.FindStringSubmatch(lines.Text())
		if m == nil {
			t.Fatalf("%s: line %q is not a checksum line", path, lines.Text())
		}
		sums[m[2]] = m[1]
	}
	return sums
}

func sha256File(t *testing.T, path string) string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:])
}
