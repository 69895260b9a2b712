package bench

import (
	"fmt"
	"math"
	"sync"
	"sync/atomic"
	"time"
)

// RunsAt is the fewest runs a throughput point measures at a concurrency.
type RunsAt struct {
	Concurrency int
	Runs        int
}

// The sizes of a throughput point. A full benchmark measures each point
// for at least pointTime of steady load and at least pointRuns runs,
// whichever ends later, so that a point is several seconds and hundreds
// of runs long at every concurrency, for every contender: a point of 30
// runs (under a second at c64) moved agentbus's ratios to its peers by up
// to 2x between two measurements of the same code.
var (
	pointRuns      = []RunsAt{{1, 300}, {8, 600}, {64, 2000}}
	quickPointRuns = []RunsAt{{1, 4}, {8, 24}, {64, 192}}
)

const pointTime = 10 * time.Second

// load is how much one repetition of a throughput point measures: at
// least runs runs, and runs started for at least dur, whichever ends
// later.
type load struct {
	runs int
	dur  time.Duration
}

// runsAt is the fewest runs at concurrency conc: anchors' runs, linear in
// log2 of the concurrency between two anchors, the first anchor's below
// it, and as many runs per run in flight as the last anchor above it.
func runsAt(anchors []RunsAt, conc int) int {
	if len(anchors) == 0 {
		return 1
	}
	first, last := anchors[0], anchors[len(anchors)-1]
	switch {
	case conc <= first.Concurrency:
		return first.Runs
	case conc >= last.Concurrency:
		return last.Runs * conc / last.Concurrency
	}
	for i := 1; i < len(anchors); i++ {
		lo, hi := anchors[i-1], anchors[i]
		if conc > hi.Concurrency {
			continue
		}
		f := math.Log2(float64(conc)/float64(lo.Concurrency)) / math.Log2(float64(hi.Concurrency)/float64(lo.Concurrency))
		return lo.Runs + int(math.Round(f*float64(hi.Runs-lo.Runs)))
	}
	return last.Runs
}

// load is the size of a throughput point at concurrency conc.
func (c Config) load(conc int) load {
	return load{runs: runsAt(c.PointRuns, conc), dur: c.PointTime}
}

// warmup is the runs, at the point's concurrency, every contender makes
// before a repetition of a throughput point and that it does not count:
// enough to fill every slot of the loop and reach the caches, the JIT-less
// interpreter's imports and the servers' first allocations.
func (c Config) warmup(conc int) int {
	if c.Quick {
		return min(conc, 4)
	}
	return max(conc, 8)
}

// keepInFlight calls run with the indices 0, 1, 2 and so on, conc calls
// at a time, until it has started at least l.runs calls and has been
// starting them for at least l.dur, then waits for the calls in flight,
// and returns the latencies and the wall time. The first failure stops
// it starting more, and fails the whole load.
func keepInFlight(conc int, l load, run func(i int) (time.Duration, error)) ([]time.Duration, time.Duration, error) {
	var (
		mu     sync.Mutex
		lat    []time.Duration
		errs   []error
		wg     sync.WaitGroup
		next   atomic.Int64
		failed atomic.Bool
	)
	start := time.Now()
	claim := func() (int, bool) {
		i := int(next.Add(1) - 1)
		return i, !failed.Load() && (i < l.runs || time.Since(start) < l.dur)
	}
	for range conc {
		wg.Go(func() {
			for i, ok := claim(); ok; i, ok = claim() {
				took, err := run(i)
				mu.Lock()
				if err != nil {
					errs = append(errs, err)
					failed.Store(true)
				} else {
					lat = append(lat, took)
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	if len(errs) > 0 {
		return nil, 0, fmt.Errorf("%d of %d runs failed: %w", len(errs), len(errs)+len(lat), errs[0])
	}
	return lat, elapsed, nil
}

// fixed is a load of exactly n runs.
func fixed(n int) load { return load{runs: n} }
