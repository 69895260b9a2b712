package host

import (
	"context"
	"errors"
	"math"
	"runtime"
	"strings"
	"testing"
	"time"
)

// TestParseCPUTimesReadsTheAggregateLine: the busy share comes from the
// aggregate cpu line's first eight fields, idle and iowait counting as
// idle.
func TestParseCPUTimesReadsTheAggregateLine(t *testing.T) {
	before, err := parseCPUTimes([]byte("cpu  100 0 50 800 50 0 0 0 0 0\ncpu0 50 0 25 400 25 0 0 0 0 0\nintr 1 2\n"))
	if err != nil {
		t.Fatal(err)
	}
	if before.total != 1000 || before.idle != 850 {
		t.Fatalf("parsed %+v", before)
	}
	// 100 ticks later, 30 busy (user and steal), 70 idle: 30 % busy.
	after, err := parseCPUTimes([]byte("cpu  120 0 50 860 60 0 0 10 99 99\n"))
	if err != nil {
		t.Fatal(err)
	}
	if got := after.busySince(before); math.Abs(got-0.30) > 1e-9 {
		t.Errorf("busy %.3f, want 0.30", got)
	}
	for _, bad := range []string{"", "intr 1 2\n", "cpu 1 2 x 4 5\n"} {
		if _, err := parseCPUTimes([]byte(bad)); err == nil {
			t.Errorf("%q parsed", bad)
		}
	}
}

// TestWaitIdleWaitsForAnIdleWindow: the wait goes on while a window is
// busy and ends with the first idle one, or at its limit.
func TestWaitIdleWaitsForAnIdleWindow(t *testing.T) {
	script := func(busy ...uint64) func() (cpuSample, error) {
		var s cpuSample
		return func() (cpuSample, error) {
			if len(busy) > 0 { // 100 ticks a window, busy[0] of them busy
				s.total += 100
				s.idle += 100 - busy[0]
				busy = busy[1:]
			}
			return s, nil
		}
	}
	// The first reading is the baseline; then 90, 50 and 5 of 100 busy.
	s, err := waitIdle(context.Background(), script(0, 90, 50, 5, 90), time.Minute)
	if err != nil || !s.Idle || math.Abs(s.First-0.9) > 1e-9 || math.Abs(s.Last-0.05) > 1e-9 {
		t.Errorf("scripted load: %+v, %v", s, err)
	}
	start := time.Now()
	s, err = waitIdle(context.Background(), script(0, 90, 90, 90, 90, 90, 90, 90, 90), 3*settleWindow)
	if err != nil || s.Idle || time.Since(start) < 3*settleWindow {
		t.Errorf("busy throughout, returned after %v: %+v, %v", time.Since(start), s, err)
	}
	s, err = waitIdle(context.Background(), func() (cpuSample, error) { return cpuSample{}, errors.New("no /proc") }, time.Minute)
	if err != nil || !s.Idle || s.First >= 0 {
		t.Errorf("without CPU times: %+v, %v", s, err)
	}
	s.Took = time.Second
	if got := s.String(); !strings.Contains(got, "unread") {
		t.Errorf("without CPU times the log says %q", got)
	}
}

// TestCPUTimesReadsThisMachine: the benchmark's machines have /proc/stat.
func TestCPUTimesReadsThisMachine(t *testing.T) {
	s, err := cpuTimes()
	if err != nil || s.total == 0 || s.idle > s.total {
		t.Fatalf("%+v, %v", s, err)
	}
}

// TestProcessUsageGrows: the process's CPU time grows as it computes,
// its page faults as it touches new memory, its collections as it
// collects.
func TestProcessUsageGrows(t *testing.T) {
	before := ProcessUsage()
	x := 0
	for deadline := time.Now().Add(50 * time.Millisecond); time.Now().Before(deadline); x++ {
	}
	mem := make([]byte, 64<<20)
	for i := 0; i < len(mem); i += 4096 {
		mem[i] = 1
	}
	runtime.GC()
	after := ProcessUsage()
	if after.CPU <= before.CPU || x == 0 || after.MinorFaults-before.MinorFaults < 1000 || after.GCs <= before.GCs || mem[4096] != 1 {
		t.Fatalf("usage %+v then %+v", before, after)
	}
	if s := after.Since(before); !strings.Contains(s, "page faults") {
		t.Errorf("Since: %q", s)
	}
}
