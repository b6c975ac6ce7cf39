package bench

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"time"
)

// proc is a child process whose output goes to a log file. The goroutine
// that waits for it ends when it exits; stop waits for that.
type proc struct {
	name string
	cmd  *exec.Cmd
	log  string
	done chan struct{}
}

func startProc(logPath, bin string, args ...string) (*proc, error) {
	logf, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	defer logf.Close() // the child has its own copy
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = logf, logf
	// Its own process group keeps a terminal's Ctrl-C away: the driver
	// stops its children in order. Pdeathsig ends them if the driver dies.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", bin, err)
	}
	p := &proc{name: bin, cmd: cmd, log: logPath, done: make(chan struct{})}
	go func() { cmd.Wait(); close(p.done) }()
	return p, nil
}

func (p *proc) pid() int { return p.cmd.Process.Pid }

func (p *proc) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// failure describes a process that exited while it should not have.
func (p *proc) failure() error {
	return fmt.Errorf("%s exited: %v; tail of %s:\n%s", p.name, p.cmd.ProcessState, p.log, p.tail(15))
}

// stop sends SIGTERM and waits up to timeout for a clean exit (status 0).
func (p *proc) stop(timeout time.Duration) error {
	if !p.exited() {
		p.cmd.Process.Signal(syscall.SIGTERM)
	}
	select {
	case <-p.done:
	case <-time.After(timeout):
		p.cmd.Process.Kill()
		<-p.done
		return fmt.Errorf("%s did not stop within %s of SIGTERM: killed it; tail of %s:\n%s", p.name, timeout, p.log, p.tail(15))
	}
	return p.exitError()
}

// exitError is nil if the process exited with status 0.
func (p *proc) exitError() error {
	if p.cmd.ProcessState.Success() {
		return nil
	}
	return p.failure()
}

// wait waits up to timeout for the process to exit on its own.
func (p *proc) wait(timeout time.Duration) error {
	select {
	case <-p.done:
		return p.exitError()
	case <-time.After(timeout):
		return errors.Join(fmt.Errorf("%s still running after %s", p.name, timeout), p.stop(10*time.Second))
	}
}

func (p *proc) tail(n int) string {
	b, _ := os.ReadFile(p.log)
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	return strings.Join(lines[max(len(lines)-n, 0):], "\n")
}
