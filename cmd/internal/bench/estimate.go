package bench

import (
	"fmt"
	"math"
	"time"
)

// What the measures outside the throughput points take on the 2-core VM
// (see estimate), from their sizes: the model's and the skills' sleeps,
// their runs at the latencies of "Latest figures" in
// docs/PERFORMANCE.md, and quick runs timed on 2026-11-27.
const (
	// modeTime is one durability mode's floor, per-hop runs, LLM share
	// (3 runs of 12 model calls of 500 ms), supervisor, budget, run
	// length and census.
	modeTime, quickModeTime = 40 * time.Second, 6 * time.Second
	// scalingTime is the executor processes' measure (1, 2 and 4).
	scalingTime, quickScalingTime = 60 * time.Second, 15 * time.Second
	// sandboxTime is the sandbox's start-to-result measure.
	sandboxTime, quickSandboxTime = 10 * time.Second, 2 * time.Second
	// peerLatencyTime is the LangGraph run with a model of 500 ms a
	// call.
	peerLatencyTime, quickPeerLatencyTime = 15 * time.Second, 3 * time.Second
)

// estimate is how long Run should take with cfg and the contenders cs,
// for the log at its start: every repetition of every throughput point as
// long as its load at the contender's reference rate (see contender.ref),
// with its warm-up and setup, and the other measures as long as they
// took on the 2-core VM. A slower day (another tenant, a slower disk)
// makes the points that their run count bounds longer: the log says
// again how long is left after each concurrency, from the rates
// measured.
func estimate(cfg Config, modes int, cs []*contender) time.Duration {
	per := modeTime
	if cfg.Quick {
		per = quickModeTime
	}
	return time.Duration(modes)*per + throughputTime(cfg, cs, cfg.Concurrency) + afterThroughput(cfg, cs)
}

// throughputTime is the expected duration of the throughput points at
// the concurrencies concs.
func throughputTime(cfg Config, cs []*contender, concs []int) time.Duration {
	var d time.Duration
	for _, conc := range concs {
		for _, ct := range cs {
			if !ct.missing() {
				d += time.Duration(cfg.Repetitions) * repTime(cfg, ct, conc)
			}
		}
	}
	return d
}

// afterThroughput is the expected duration of what follows the
// interleaved points: the other executor counts (one repetition each at
// the highest concurrency), the executor processes, the sandbox and the
// LangGraph run with model latency.
func afterThroughput(cfg Config, cs []*contender) time.Duration {
	var d time.Duration
	top := topConcurrency(cfg.Concurrency)
	for _, ct := range cs {
		if ct.executorsToo {
			d += time.Duration(len(otherExecutors(cfg.Executors))) * repTime(cfg, ct, top)
		}
	}
	pick := func(full, quick time.Duration) time.Duration {
		if cfg.Quick {
			return quick
		}
		return full
	}
	if !cfg.SkipScaling {
		d += pick(scalingTime, quickScalingTime)
	}
	d += pick(sandboxTime, quickSandboxTime)
	if !cfg.SkipPeer {
		d += pick(peerLatencyTime, quickPeerLatencyTime)
	}
	return d
}

// repTime is the expected duration of one repetition of ct's point at
// conc: its load (the longer of its least time and its run count at the
// contender's rate), its warm-up and its setup.
func repTime(cfg Config, ct *contender, conc int) time.Duration {
	rate := ct.rate(conc)
	if rate <= 0 {
		return ct.setup
	}
	l := cfg.load(conc)
	secs := func(runs int) time.Duration { return time.Duration(float64(runs) / rate * float64(time.Second)) }
	return max(l.dur, secs(l.runs)) + secs(cfg.warmup(conc)) + ct.setup
}

// rate is ct's runs/s at conc: the last measured, or the reference rate
// of the nearest of concurrency 1, 8 and 64.
func (ct *contender) rate(conc int) float64 {
	if r, ok := ct.rates[conc]; ok {
		return r
	}
	near, best := 0, math.Inf(1)
	for i, c := range []float64{1, 8, 64} {
		if dist := math.Abs(math.Log2(float64(conc)) - math.Log2(c)); dist < best {
			near, best = i, dist
		}
	}
	return ct.ref[near]
}

// topConcurrency is the highest of concs.
func topConcurrency(concs []int) int {
	top := 0
	for _, c := range concs {
		top = max(top, c)
	}
	return top
}

// otherExecutors is the executor counts besides one.
func otherExecutors(counts []int) []int {
	var out []int
	for _, n := range counts {
		if n != 1 {
			out = append(out, n)
		}
	}
	return out
}

// minutes prints a duration to the second, in minutes beyond one.
func minutes(d time.Duration) string {
	d = d.Round(time.Second)
	if d < time.Minute {
		return fmt.Sprintf("%d s", int(d.Seconds()))
	}
	return fmt.Sprintf("%d min %d s", int(d.Minutes()), int(d.Seconds())%60)
}

// seconds is s seconds as a duration.
func seconds(s float64) time.Duration { return time.Duration(s * float64(time.Second)) }
