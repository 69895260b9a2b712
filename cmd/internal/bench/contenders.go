package bench

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"time"
)

// The contenders' runs/s at concurrency 1, 8 and 64 in the make bench of
// 2026-11-26 (docs/PERFORMANCE.md, "Latest figures"), for the estimate of
// the benchmark's duration only; the skeleton of today's traffic, new
// since, takes the minimum's.
var (
	refAgentbus  = map[string][3]float64{"default": {41.4, 119.1, 115.0}, "sync_always": {19.8, 29.2, 34.0}}
	refAllInOne  = [3]float64{55.5, 120.6, 115.2}
	refSkeleton  = map[string][3]float64{"census": {90.9, 167.1, 300.1}, "minimum": {109.6, 205.8, 294.9}, "today": {109.6, 205.8, 294.9}}
	refLangGraph = map[string][3]float64{"memory": {208.1, 203.3, 228.6}, "sqlite": {65.4, 69.5, 61.5}}
	refRestate   = [3]float64{41.3, 112.9, 181.4}
)

// agentbusContender is agentbus with one executor on srv, mr's server,
// every role connected over TCP (as separate processes are), or in memory
// (inProc: the all-in-one of agentbus up and make run, every role in one
// process with its embedded server).
func agentbusContender(cfg Config, srv *benchServer, mr *ModeReport, inProc bool) *contender {
	ct := &contender{name: "agentbus " + mr.Mode + ", TCP", ref: refAgentbus[mr.Mode], setup: time.Second, executorsToo: true}
	if inProc {
		ct = &contender{name: "agentbus all-in-one, in memory", ref: refAllInOne, setup: time.Second}
	}
	ct.measure = func(ctx context.Context, conc int) (Rep, error) {
		tp, err := agentbusPoint(ctx, cfg, srv, mr, 1, conc, inProc)
		return tp.rep(), err
	}
	ct.record = func(conc int, reps []Rep) {
		tp := Throughput{Executors: 1, Concurrency: conc}.withReps(reps, mr.HopTCP.HopsPerRun)
		if inProc {
			mr.AllInOne = append(mr.AllInOne, tp)
		} else {
			mr.Throughput = append(mr.Throughput, tp)
		}
	}
	return ct
}

// agentbusPoint measures one repetition of agentbus's point at conc with
// executors executors, on streams and buckets emptied first: every point
// and repetition starts from the same empty stores, as each peer's does.
func agentbusPoint(ctx context.Context, cfg Config, srv *benchServer, mr *ModeReport, executors, conc int, inProc bool) (Throughput, error) {
	if err := srv.reset(ctx); err != nil {
		return Throughput{}, err
	}
	return throughput(ctx, srv, executors, conc, cfg.load(conc), cfg.warmup(conc), mr.HopTCP.HopsPerRun, inProc)
}

// otherExecutorCounts measures agentbus over TCP with each executor count
// of cfg besides one, once, at the highest concurrency: no ratio is taken
// from them, so they are not repeated.
func otherExecutorCounts(ctx context.Context, cfg Config, srv *benchServer, mr *ModeReport) error {
	top := topConcurrency(cfg.Concurrency)
	for _, ex := range otherExecutors(cfg.Executors) {
		fmt.Fprintf(cfg.Log, "bench:   agentbus %s, TCP, %d executors, concurrency %d (once)\n", mr.Mode, ex, top)
		tp, err := agentbusPoint(ctx, cfg, srv, mr, ex, top, false)
		if err != nil {
			return fmt.Errorf("%d executors, concurrency %d: %w", ex, top, err)
		}
		mr.Throughput = append(mr.Throughput, tp.withReps([]Rep{tp.rep()}, mr.HopTCP.HopsPerRun))
	}
	return nil
}

// skeletonContender is a skeleton traffic on srv, connected over TCP or
// in memory.
func skeletonContender(cfg Config, srv *benchServer, mr *ModeReport, traffic skelTraffic, tcp bool) *contender {
	p := SkeletonPoint{Traffic: traffic.name, Connections: deploymentTCP}
	if !tcp {
		p.Connections = connectionsInMemory
	}
	ct := &contender{name: "skeleton " + p.Traffic + ", " + p.Connections, ref: refSkeleton[traffic.name], setup: time.Second / 2}
	ct.measure = func(ctx context.Context, conc int) (Rep, error) {
		if err := srv.reset(ctx); err != nil {
			return Rep{}, err
		}
		tp, err := skeleton(ctx, srv, traffic, tcp, conc, cfg.load(conc), cfg.warmup(conc))
		return tp.rep(), err
	}
	ct.record = func(conc int, reps []Rep) {
		q := p
		q.Throughput = Throughput{Executors: 1, Concurrency: conc}.withReps(reps, skelHops)
		mr.Skeleton = append(mr.Skeleton, q)
	}
	return ct
}

// langGraphContender is the LangGraph peer with the checkpointer cp; pr
// is the report it files its points in, and says when it is missing.
func langGraphContender(cfg Config, p *peer, pr *PeerReport, cp string) *contender {
	var last PeerResult                                                                       // the figures peer.py prints besides the measured ones
	return &contender{name: "LangGraph " + cp, ref: refLangGraph[cp], setup: 2 * time.Second, // the interpreter and its imports
		measure: func(ctx context.Context, conc int) (Rep, error) {
			res, err := p.measure(ctx, cp, conc, cfg.load(conc), cfg.warmup(conc), 0)
			last = res
			return res.rep(), err
		},
		record: func(conc int, reps []Rep) { pr.Results = append(pr.Results, last.withReps(reps)) },
		off:    func() bool { return !pr.Available },
		drop:   func(err error) { *pr = PeerReport{Reason: err.Error()} },
	}
}

// restateContender is the Restate peer; rr is the report it files its
// points in, and says when it is missing.
func restateContender(cfg Config, rp *restatePeer, rr *RestateReport) *contender {
	return &contender{name: "Restate", ref: refRestate, setup: 2500 * time.Millisecond, // a server started and stopped
		measure: func(ctx context.Context, conc int) (Rep, error) {
			res, err := rp.measure(ctx, conc, cfg.load(conc), cfg.warmup(conc))
			return res.rep(), err
		},
		record: func(conc int, reps []Rep) {
			rr.Results = append(rr.Results, RestateResult{Concurrency: conc}.withReps(reps))
		},
		off:  func() bool { return !rr.Available },
		drop: func(err error) { *rr = RestateReport{Reason: err.Error(), Version: rr.Version} },
	}
}

// sortPoints puts the points interleave filed by concurrency back in the
// report's order: the skeleton's by traffic, LangGraph's by checkpointer,
// each by concurrency within.
func (r *Report) sortPoints() {
	for i := range r.Modes {
		slices.SortStableFunc(r.Modes[i].Skeleton, func(a, b SkeletonPoint) int {
			return cmp.Compare(skelIndex(a.Traffic), skelIndex(b.Traffic))
		})
	}
	slices.SortStableFunc(r.Peer.Results, func(a, b PeerResult) int {
		return cmp.Compare(slices.Index(checkpointers, a.Checkpointer), slices.Index(checkpointers, b.Checkpointer))
	})
}

// checkpointers are the LangGraph checkpointers measured, in order.
var checkpointers = []string{"memory", "sqlite"}

// skelIndex is a traffic's place in skelTraffics.
func skelIndex(name string) int {
	return slices.IndexFunc(skelTraffics, func(t skelTraffic) bool { return t.name == name })
}
