package bench

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// clockTicks is USER_HZ, the unit of utime and stime in /proc/PID/stat. It
// is 100 on every Linux architecture Go supports.
const clockTicks = 100

// usage is what a process has used so far, in seconds.
type usage struct {
	cpu float64 // user plus system CPU time
	// wait is how long its threads were runnable but waiting for a core
	// (the second field of each thread's schedstat; 0 where the kernel
	// keeps no schedstats).
	wait float64
}

// usageOf reads pid's CPU time and run-queue wait.
func usageOf(pid int) (usage, error) {
	st, err := readStat(pid)
	if err != nil {
		return usage{}, err
	}
	return usage{cpu: float64(st.utime+st.stime) / clockTicks, wait: runQueueSeconds(pid)}, nil
}

// runQueueSeconds sums the run-queue wait of pid's threads.
func runQueueSeconds(pid int) float64 {
	files, _ := filepath.Glob(filepath.Join("/proc", strconv.Itoa(pid), "task", "*", "schedstat"))
	var ns uint64
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			continue // the thread ended
		}
		if fields := strings.Fields(string(b)); len(fields) >= 2 {
			n, _ := strconv.ParseUint(fields[1], 10, 64)
			ns += n
		}
	}
	return float64(ns) / 1e9
}

type procStat struct {
	ppid         int
	utime, stime uint64
}

// readStat parses /proc/PID/stat. The command name (field 2) may hold
// spaces and parentheses, so fields are counted from the last ')'.
func readStat(pid int) (procStat, error) {
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return procStat{}, err
	}
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return procStat{}, fmt.Errorf("/proc/%d/stat: no ')' in %q", pid, b)
	}
	f := strings.Fields(string(b[i+1:]))
	// f[0] is field 3 (state): ppid is field 4, utime 14, stime 15.
	if len(f) < 13 {
		return procStat{}, fmt.Errorf("/proc/%d/stat: %d fields after the name, want at least 13", pid, len(f))
	}
	ppid, err1 := strconv.Atoi(f[1])
	utime, err2 := strconv.ParseUint(f[11], 10, 64)
	stime, err3 := strconv.ParseUint(f[12], 10, 64)
	if err1 != nil || err2 != nil || err3 != nil {
		return procStat{}, fmt.Errorf("/proc/%d/stat: bad ppid, utime or stime in %q", pid, b)
	}
	return procStat{ppid: ppid, utime: utime, stime: stime}, nil
}

// peakRSSBytes returns pid's peak resident set size (VmHWM).
func peakRSSBytes(pid int) (int64, error) {
	f, err := os.Open(filepath.Join("/proc", strconv.Itoa(pid), "status"))
	if err != nil {
		return 0, err
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		rest, ok := strings.CutPrefix(s.Text(), "VmHWM:")
		if !ok {
			continue
		}
		kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
		if err != nil {
			return 0, fmt.Errorf("/proc/%d/status: VmHWM %q: %w", pid, rest, err)
		}
		return kb * 1024, nil
	}
	if err := s.Err(); err != nil {
		return 0, err
	}
	return 0, fmt.Errorf("/proc/%d/status has no VmHWM line", pid)
}

// cpuMeter measures the CPU time the processes of a benchmark use during
// an interval: PostgreSQL (postmaster and children), nats-server, and the
// relay under test. A pid of 0 is a process not on this machine (a server
// given by URL): its share reads 0.
//
// Processes can end inside the interval (pg_recvlogical's walsender exits
// with it), taking their CPU time with them, so the meter keeps the last
// value it saw of every pid: call tick while the interval runs.
type cpuMeter struct {
	postmaster, natsServer, relay int
	base, last                    map[int]usage // by pid
	machineBase, stolenBase       float64       // busy and stolen CPU seconds of the whole machine
}

// cpuSplit is, by process group, the cores kept busy on average over an
// interval (1.0 = one core all the time).
type cpuSplit struct {
	Postgres   float64 `json:"postgres"`
	NATSServer float64 `json:"nats_server"`
	Relay      float64 `json:"relay"`
	// Machine counts every process (the benchmark's load generator and
	// consumer too): how close the machine is to its cores.
	Machine float64 `json:"machine"`
	// Stolen is the part of Machine the hypervisor ran other guests in
	// while this machine wanted its cores (/proc/stat's steal): a noisy
	// neighbour, not work of this benchmark.
	Stolen float64 `json:"stolen"`
	// Waiting is, by group, the seconds per second its threads were
	// runnable but waiting for a core: what a full machine costs each.
	Waiting waitSplit `json:"run_queue_wait"`
}

// waitSplit is run-queue wait by process group, in seconds per second
// (summed over threads, so it can exceed 1).
type waitSplit struct {
	Postgres   float64 `json:"postgres"`
	NATSServer float64 `json:"nats_server"`
	Relay      float64 `json:"relay"`
}

func newCPUMeter(postmaster, natsServer, relay int) *cpuMeter {
	m := &cpuMeter{postmaster: postmaster, natsServer: natsServer, relay: relay,
		base: map[int]usage{}, last: map[int]usage{}}
	m.read(m.base)
	m.machineBase, m.stolenBase, _ = machineSeconds()
	for pid, v := range m.base {
		m.last[pid] = v
	}
	return m
}

// read records the usage of every process of the three groups in into.
func (m *cpuMeter) read(into map[int]usage) {
	for _, pid := range []int{m.natsServer, m.relay} {
		if pid == 0 {
			continue
		}
		if v, err := usageOf(pid); err == nil {
			into[pid] = v
		}
	}
	if m.postmaster == 0 {
		return
	}
	if v, err := usageOf(m.postmaster); err == nil {
		into[m.postmaster] = v
	}
	for _, child := range children(m.postmaster) {
		if v, err := usageOf(child); err == nil {
			into[child] = v
		}
	}
}

// tick records the current values; a pid first seen now was born inside
// the interval and counts from zero.
func (m *cpuMeter) tick() { m.read(m.last) }

// end returns the split over an interval of seconds.
func (m *cpuMeter) end(seconds float64) cpuSplit {
	m.tick()
	if seconds <= 0 {
		return cpuSplit{}
	}
	var s cpuSplit
	if busy, stolen, err := machineSeconds(); err == nil {
		s.Machine = (busy - m.machineBase) / seconds
		s.Stolen = (stolen - m.stolenBase) / seconds
	}
	for pid, v := range m.last {
		cpu, wait := (v.cpu-m.base[pid].cpu)/seconds, (v.wait-m.base[pid].wait)/seconds
		switch pid {
		case m.natsServer:
			s.NATSServer += cpu
			s.Waiting.NATSServer += wait
		case m.relay:
			s.Relay += cpu
			s.Waiting.Relay += wait
		default:
			s.Postgres += cpu
			s.Waiting.Postgres += wait
		}
	}
	return s
}

// machineSeconds returns the CPU seconds all cores have spent busy (not
// idle nor waiting for I/O) since boot, and the part of them stolen by the
// hypervisor, from /proc/stat's cpu line.
func machineSeconds() (busy, stolen float64, err error) {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0, 0, err
	}
	line, _, _ := strings.Cut(string(b), "\n")
	f := strings.Fields(line)
	if len(f) < 9 || f[0] != "cpu" {
		return 0, 0, fmt.Errorf("/proc/stat: unexpected first line %q", line)
	}
	var busyTicks, stolenTicks uint64
	// user nice system idle iowait irq softirq steal
	for i, v := range f[1:9] {
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			return 0, 0, fmt.Errorf("/proc/stat: field %d of %q: %w", i+2, line, err)
		}
		if i != 3 && i != 4 {
			busyTicks += n
		}
		if i == 7 {
			stolenTicks = n
		}
	}
	return float64(busyTicks) / clockTicks, float64(stolenTicks) / clockTicks, nil
}

// children returns the pids whose parent is pid.
func children(pid int) []int {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	var pids []int
	for _, e := range entries {
		child, err := strconv.Atoi(e.Name())
		if err != nil || child == pid {
			continue
		}
		if st, err := readStat(child); err == nil && st.ppid == pid {
			pids = append(pids, child)
		}
	}
	return pids
}
