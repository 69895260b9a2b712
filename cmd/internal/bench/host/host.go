// Package host is what the benchmark knows of the machine it runs on:
// the CPU time its process has used, and how busy the machine's CPUs are,
// so that each measurement starts on a settled machine (Settle).
package host

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"runtime"
	"runtime/metrics"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Settling: before each repetition the machine is brought back to the
// same state, so that one contender's after-effects weigh on none of the
// others: a peer's dirty pages that the kernel would write back later, a
// stopped process's last work. Each repetition starts once the disk holds
// every written page and the machine's CPUs have been idle for a moment.
// The benchmark's own heap is left as the last point left it: forcing a
// collection and returning its memory to the system before each
// repetition made every in-process contender start cold, and measured
// agentbus about a quarter slower at c64 than its warm-up leaves it.
const (
	// settleIdle is the share of the machine's CPU time that may be busy
	// over a settleWindow for it to count as idle.
	settleIdle   = 0.10
	settleWindow = 250 * time.Millisecond
	// settleMax bounds the wait for idle CPUs: a machine busy with work
	// of its own is measured as it is, and the log says so.
	settleMax = 15 * time.Second
)

// Settled reports how a settle went: how long it took, and the busy share
// of the CPUs over its first and last windows (First is -1 where the
// CPUs' times could not be read).
type Settled struct {
	Took        time.Duration
	First, Last float64
	Idle        bool // the last window was idle; false when settleMax ran out
}

// String says how the settle went, for the benchmark's log.
func (s Settled) String() string {
	if s.Took == 0 {
		return "not settled"
	}
	if s.First < 0 {
		return fmt.Sprintf("synced in %.1f s, the CPUs' times unread", s.Took.Seconds())
	}
	state := "idle"
	if !s.Idle {
		state = "still busy"
	}
	return fmt.Sprintf("settled in %.1f s, CPUs %.0f %% busy then %.0f %% (%s)", s.Took.Seconds(), 100*s.First, 100*s.Last, state)
}

// Settle syncs the file systems, then waits until the CPUs are idle over
// a window, at most settleMax. Where /proc/stat cannot be read it only
// syncs.
func Settle(ctx context.Context) (Settled, error) {
	start := time.Now()
	syscall.Sync()
	s, err := waitIdle(ctx, cpuTimes, settleMax)
	s.Took = time.Since(start)
	return s, err
}

// waitIdle waits until the CPU times read shows the CPUs idle over a
// window, at most limit; it returns at once when read fails (no
// /proc/stat here).
func waitIdle(ctx context.Context, read func() (cpuSample, error), limit time.Duration) (Settled, error) {
	start := time.Now()
	s := Settled{First: -1}
	prev, err := read()
	if err != nil {
		return Settled{First: -1, Idle: true}, nil
	}
	for {
		select {
		case <-ctx.Done():
			return s, ctx.Err()
		case <-time.After(settleWindow):
		}
		cur, err := read()
		if err != nil {
			return Settled{First: -1, Idle: true}, nil
		}
		s.Last = cur.busySince(prev)
		if s.First < 0 {
			s.First = s.Last
		}
		prev = cur
		if s.Idle = s.Last <= settleIdle; s.Idle || time.Since(start) >= limit {
			return s, nil
		}
	}
}

// cpuSample is the machine's CPU time so far, in clock ticks: all of it,
// and the idle share (idle and iowait).
type cpuSample struct{ total, idle uint64 }

// busySince is the share of the CPU time between prev and c that was not
// idle.
func (c cpuSample) busySince(prev cpuSample) float64 {
	total := c.total - prev.total
	if total == 0 || c.total < prev.total || c.idle < prev.idle {
		return 0
	}
	return 1 - float64(c.idle-prev.idle)/float64(total)
}

// cpuTimes reads the machine's CPU times from /proc/stat.
func cpuTimes() (cpuSample, error) {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return cpuSample{}, err
	}
	return parseCPUTimes(b)
}

// parseCPUTimes reads the aggregate "cpu" line of /proc/stat: user, nice,
// system, idle, iowait, irq, softirq, steal, ... ticks. Guest time is
// already counted in user and nice, so only the first eight add up.
func parseCPUTimes(stat []byte) (cpuSample, error) {
	sc := bufio.NewScanner(bytes.NewReader(stat))
	for sc.Scan() {
		f := bytes.Fields(sc.Bytes())
		if len(f) < 5 || string(f[0]) != "cpu" {
			continue
		}
		var s cpuSample
		for i, v := range f[1:min(len(f), 9)] {
			n, err := strconv.ParseUint(string(v), 10, 64)
			if err != nil {
				return cpuSample{}, fmt.Errorf("/proc/stat: %q: %w", v, err)
			}
			s.total += n
			if i == 3 || i == 4 {
				s.idle += n
			}
		}
		return s, nil
	}
	return cpuSample{}, fmt.Errorf("/proc/stat: no cpu line")
}

// Machine describes where the figures came from.
type Machine struct {
	CPU      string `json:"cpu"`
	Cores    int    `json:"cores"`
	GOOS     string `json:"goos"`
	GOARCH   string `json:"goarch"`
	Go       string `json:"go"`
	Hostname string `json:"hostname"`
}

// Describe describes this machine: its CPU model (from /proc/cpuinfo,
// where there is one), cores, system, Go version and host name.
func Describe() Machine {
	m := Machine{Cores: runtime.NumCPU(), GOOS: runtime.GOOS, GOARCH: runtime.GOARCH, Go: runtime.Version()}
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for line := range strings.SplitSeq(string(b), "\n") {
			if name, ok := strings.CutPrefix(line, "model name"); ok {
				m.CPU = strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(name), ":"))
				break
			}
		}
	}
	m.Hostname, _ = os.Hostname()
	return m
}

// ProcessCPU is the user plus system CPU time the process has used.
func ProcessCPU() time.Duration { return ProcessUsage().CPU }

// Usage is what the process has used so far: CPU time, minor page faults
// (memory the kernel had to map in) and garbage collections.
type Usage struct {
	CPU         time.Duration
	MinorFaults int64
	GCs         uint64
}

// ProcessUsage reads the process's usage so far.
func ProcessUsage() Usage {
	var u Usage
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) == nil {
		u.CPU, u.MinorFaults = time.Duration(ru.Utime.Nano()+ru.Stime.Nano()), ru.Minflt
	}
	gcs := []metrics.Sample{{Name: "/gc/cycles/total:gc-cycles"}}
	if metrics.Read(gcs); gcs[0].Value.Kind() == metrics.KindUint64 {
		u.GCs = gcs[0].Value.Uint64()
	}
	return u
}

// Since is what the process used between before and u, for the
// benchmark's log.
func (u Usage) Since(before Usage) string {
	return fmt.Sprintf("this process %.1f s CPU, %d page faults, %d GCs", (u.CPU - before.CPU).Seconds(),
		u.MinorFaults-before.MinorFaults, u.GCs-before.GCs)
}
