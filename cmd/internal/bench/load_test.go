package bench

import (
	"errors"
	"sync/atomic"
	"testing"
	"time"
)

func TestRunsAt(t *testing.T) {
	for _, c := range []struct{ conc, want int }{
		{1, 300}, {0, 300}, {8, 600}, {64, 2000},
		{2, 400}, {4, 500}, // a third and two thirds of the way from 1 to 8 in log2
		{16, 1067}, {32, 1533},
		{128, 4000}, // as many runs per run in flight as at 64
	} {
		if got := runsAt(pointRuns, c.conc); got != c.want {
			t.Errorf("runsAt(%d) = %d, want %d", c.conc, got, c.want)
		}
	}
	for _, c := range []struct{ conc, want int }{{1, 4}, {8, 24}, {64, 192}} {
		if got := runsAt(quickPointRuns, c.conc); got != c.want {
			t.Errorf("quick runsAt(%d) = %d, want %d", c.conc, got, c.want)
		}
	}
}

func TestConfigSizes(t *testing.T) {
	full := Config{}
	full.defaults()
	if full.Repetitions != 3 || full.PointTime != 10*time.Second || full.load(64) != (load{runs: 2000, dur: 10 * time.Second}) ||
		full.warmup(1) != 8 || full.warmup(64) != 64 {
		t.Errorf("full: %d repetitions, load(64) %+v, warm-up %d / %d", full.Repetitions, full.load(64), full.warmup(1), full.warmup(64))
	}
	quick := Config{Quick: true}
	quick.defaults()
	if quick.Repetitions != 1 || quick.PointTime != 0 || quick.load(8) != (load{runs: 24}) || quick.warmup(8) != 4 {
		t.Errorf("quick: %d repetitions, load(8) %+v, warm-up %d", quick.Repetitions, quick.load(8), quick.warmup(8))
	}
}

// TestKeepInFlight: the loop measures exactly the runs asked without a
// least time, at least the runs and at least the time with one, and
// stops starting runs after a failure.
func TestKeepInFlight(t *testing.T) {
	sleep := func(int) (time.Duration, error) { time.Sleep(time.Millisecond); return time.Millisecond, nil }
	lat, _, err := keepInFlight(4, fixed(50), sleep)
	if err != nil || len(lat) != 50 {
		t.Fatalf("fixed(50): %d runs, %v", len(lat), err)
	}
	lat, elapsed, err := keepInFlight(2, load{runs: 3, dur: 60 * time.Millisecond}, sleep)
	if err != nil || len(lat) < 10 || elapsed < 60*time.Millisecond {
		t.Fatalf("3 runs for 60 ms: %d runs in %v, %v", len(lat), elapsed, err)
	}
	lat, _, err = keepInFlight(3, load{runs: 200, dur: time.Millisecond}, sleep)
	if err != nil || len(lat) < 200 {
		t.Fatalf("200 runs for 1 ms: %d runs, %v", len(lat), err)
	}
	var calls atomic.Int64
	boom := errors.New("boom")
	_, _, err = keepInFlight(2, load{runs: 1000, dur: time.Minute}, func(i int) (time.Duration, error) {
		calls.Add(1)
		if i == 5 {
			return 0, boom
		}
		return time.Millisecond, nil
	})
	if !errors.Is(err, boom) || calls.Load() > 10 {
		t.Fatalf("after a failure: %v, %d calls", err, calls.Load())
	}
}
