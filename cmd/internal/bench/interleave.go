package bench

import (
	"context"
	"fmt"
	"runtime/pprof"
	"strconv"
	"time"

	"github.com/agentbus/agentbus/cmd/internal/bench/host"
)

// A contender is one of the things the throughput points compare:
// agentbus in one wiring and durability mode, a skeleton traffic, or a
// peer.
type contender struct {
	name string
	// measure measures one repetition of the point at concurrency conc.
	measure func(ctx context.Context, conc int) (Rep, error)
	// record files the repetitions of the point at conc in the report.
	record func(conc int, reps []Rep)
	// A peer may be missing, or fail: off reports whether it is missing
	// (from the start or since it failed) and drop records why it
	// failed, and the benchmark goes on without it. A contender without
	// them fails the benchmark when it fails.
	off  func() bool
	drop func(err error)
	// ref is the runs/s the contender made at concurrency 1, 8 and 64
	// in the make bench of 2026-11-26, and setup what a repetition
	// costs besides its load and warm-up (a deployment, a process to
	// start): the estimate of the benchmark's duration takes them until
	// the contender has measured a point.
	ref   [3]float64
	setup time.Duration
	// executorsToo marks agentbus over TCP, measured once more with
	// each other executor count at the highest concurrency.
	executorsToo bool
	// rates is the runs/s of the contender's last repetition at each
	// concurrency.
	rates map[int]float64
}

// labelled measures one repetition of ct at conc with the goroutines it
// starts labelled by contender and concurrency, so that a CPU profile of
// the benchmark (--cpuprofile) splits by them: go tool pprof
// -tagfocus=contender=... The shared nats-server's goroutines predate
// the point and carry no contender label; the server labels them itself
// by account, stream and consumer.
func (ct *contender) labelled(ctx context.Context, conc int) (r Rep, err error) {
	pprof.Do(ctx, pprof.Labels("contender", ct.name, "concurrency", strconv.Itoa(conc)), func(ctx context.Context) {
		r, err = ct.measure(ctx, conc)
	})
	return r, err
}

// missing reports whether the contender is a peer that is not measured.
func (ct *contender) missing() bool { return ct.off != nil && ct.off() }

// interleave measures every contender at every concurrency of cfg,
// cfg.Repetitions times, interleaved: at each concurrency, the first
// repetition of every contender in turn, then the second of every one,
// and so on (A, B, C, A, B, C, ...). A drift of the machine's speed
// (another tenant, the disk's flushes) then weighs on every contender
// alike, and each repetition of one sits next to the same repetition of
// the others; each starts on a settled machine (host.Settle). Each point is
// then filed with the medians of its repetitions.
func interleave(ctx context.Context, cfg Config, cs []*contender, start time.Time) error {
	for ci, conc := range cfg.Concurrency {
		reps := make([][]Rep, len(cs))
		for rep := range cfg.Repetitions {
			for i, ct := range cs {
				if ct.missing() {
					continue
				}
				var st host.Settled
				if cfg.Settle != nil {
					s, err := cfg.Settle(ctx)
					if err != nil {
						return err
					}
					st = s
				}
				used := host.ProcessUsage()
				r, err := ct.labelled(ctx, conc)
				if err != nil {
					if ct.drop == nil || ctx.Err() != nil {
						return fmt.Errorf("%s, concurrency %d: %w", ct.name, conc, err)
					}
					fmt.Fprintf(cfg.Log, "bench:   c%d %d/%d %s: failed, left out from now on: %v\n", conc, rep+1, cfg.Repetitions, ct.name, err)
					ct.drop(err)
					continue
				}
				if ct.rates == nil {
					ct.rates = map[int]float64{}
				}
				ct.rates[conc] = r.RunsPerS
				reps[i] = append(reps[i], r)
				fmt.Fprintf(cfg.Log, "bench:   c%d %d/%d %s: %.1f runs/s (%d runs in %.1f s; %s; %s)\n",
					conc, rep+1, cfg.Repetitions, ct.name, r.RunsPerS, r.Runs, r.Seconds, st, host.ProcessUsage().Since(used))
			}
		}
		for i, ct := range cs {
			if !ct.missing() && len(reps[i]) > 0 {
				ct.record(conc, reps[i])
			}
		}
		if ci < len(cfg.Concurrency)-1 {
			left := throughputTime(cfg, cs, cfg.Concurrency[ci+1:]) + afterThroughput(cfg, cs)
			fmt.Fprintf(cfg.Log, "bench: %s so far; about %s left\n", minutes(time.Since(start)), minutes(left))
		}
	}
	return nil
}
