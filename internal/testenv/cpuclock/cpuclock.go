// Package cpuclock reads the CPU time this process has used, for
// benchmarks on a shared machine: wall time there depends on what else
// runs, CPU time per event much less.
package cpuclock

import (
	"syscall"
	"time"
)

// Process returns the user and system CPU time of this process so far
// (every thread, an in-process nats-server included), or 0 if the system
// does not say.
func Process() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
