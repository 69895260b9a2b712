package bench

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/agentbus/agentbus/cmd/internal/bench/host"
	"github.com/agentbus/agentbus/sandbox"
)

// The supervisor measurement: 10 lanes of 100 ms skill latency (issue 12).
const (
	supervisorLanes   = 10
	supervisorLatency = 100 * time.Millisecond
)

// Config sizes a benchmark run.
type Config struct {
	Root        string // repository root (for bench/langgraph); default "."
	OutDir      string // JSON and chart; default bench/out
	Quick       bool   // small samples, one repetition: a smoke run
	SkipPeer    bool   // measure neither LangGraph nor Restate
	SkipScaling bool   // do not measure executor processes
	BinDir      string // where the executor and restatepeer binaries are; default beside this executable
	FloorTrips  int
	HopRuns     int
	Concurrency []int
	Executors   []int
	LLMLatency  time.Duration
	LLMRuns     int
	Iterations  int
	Log         io.Writer // progress; default stderr
	ModesToRun  []string  // default both
	// Each repetition of a throughput point measures at least the runs
	// PointRuns gives its concurrency (see runsAt) and for at least
	// PointTime; Repetitions is how many, interleaved (see interleave).
	PointRuns   []RunsAt
	PointTime   time.Duration
	Repetitions int
	// Settle brings the machine back to the same state before each
	// repetition (default host.Settle); nil in a Config that skips defaults:
	// no settling.
	Settle func(context.Context) (host.Settled, error)
}

func (c *Config) defaults() {
	if c.Root == "" {
		c.Root = "."
	}
	if c.OutDir == "" {
		c.OutDir = "bench/out"
	}
	if c.Log == nil {
		c.Log = os.Stderr
	}
	if c.Settle == nil {
		c.Settle = host.Settle
	}
	set := func(v *int, full, quick int) {
		if *v == 0 {
			*v = full
			if c.Quick {
				*v = quick
			}
		}
	}
	set(&c.FloorTrips, 2000, 200)
	set(&c.HopRuns, 40, 4)
	set(&c.LLMRuns, 3, 2)
	set(&c.Iterations, 1000, 120)
	set(&c.Repetitions, 3, 1)
	if len(c.PointRuns) == 0 {
		c.PointRuns = pointRuns
		if c.Quick {
			c.PointRuns = quickPointRuns
		}
	}
	if c.PointTime == 0 && !c.Quick {
		c.PointTime = pointTime
	}
	if len(c.Concurrency) == 0 {
		c.Concurrency = []int{1, 8, 64}
		if c.Quick {
			c.Concurrency = []int{1, 8}
		}
	}
	if len(c.Executors) == 0 {
		c.Executors = []int{1, 2, 4}
		if c.Quick {
			c.Executors = []int{1, 2}
		}
	}
	if c.LLMLatency == 0 {
		c.LLMLatency = 500 * time.Millisecond
		if c.Quick {
			c.LLMLatency = 50 * time.Millisecond
		}
	}
}

// Run measures everything and writes the report: each durability mode's
// own measures, then the throughput points of every contender
// (agentbus, the all-in-one, the skeleton runs, LangGraph, Restate)
// interleaved, then the other executor counts, the executor processes,
// the sandbox and LangGraph with model latency.
func Run(ctx context.Context, cfg Config) (*Report, error) {
	cfg.defaults()
	start := time.Now()
	r := &Report{Time: start.UTC(), Machine: host.Describe(), Quick: cfg.Quick, Repetitions: cfg.Repetitions}
	var servers []*benchServer
	defer func() {
		for _, srv := range servers {
			srv.close()
		}
	}()
	for _, m := range modes {
		if len(cfg.ModesToRun) > 0 && !contains(cfg.ModesToRun, m.Name) {
			continue
		}
		srv, err := startServer(m)
		if err != nil {
			return nil, fmt.Errorf("mode %s: %w", m.Name, err)
		}
		servers = append(servers, srv)
		r.Modes = append(r.Modes, ModeReport{Mode: m.Name})
	}
	lg, rp := preparePeers(ctx, cfg, r)
	if rp != nil && rp.cleanup != nil {
		defer rp.cleanup()
	}
	cs := r.contenders(cfg, servers, lg, rp)
	r.EstimatedS = estimate(cfg, len(r.Modes), cs).Seconds()
	fmt.Fprintf(cfg.Log, "bench: expected to take about %s (%d repetition(s) of %d contenders at concurrency %v, each %s)\n",
		minutes(seconds(r.EstimatedS)), cfg.Repetitions, len(cs), cfg.Concurrency, pointSizes(cfg))
	for i := range r.Modes {
		fmt.Fprintf(cfg.Log, "bench: durability mode %s\n", r.Modes[i].Mode)
		if err := runMode(ctx, cfg, servers[i], &r.Modes[i]); err != nil {
			return nil, fmt.Errorf("mode %s: %w", r.Modes[i].Mode, err)
		}
	}
	fmt.Fprintf(cfg.Log, "bench: throughput points, %d interleaved repetition(s)\n", cfg.Repetitions)
	if err := interleave(ctx, cfg, cs, start); err != nil {
		return nil, err
	}
	for i := range r.Modes {
		if err := otherExecutorCounts(ctx, cfg, servers[i], &r.Modes[i]); err != nil {
			return nil, fmt.Errorf("mode %s: %w", r.Modes[i].Mode, err)
		}
	}
	r.sortPoints()
	if cfg.SkipScaling {
		r.Scaling = ScalingReport{Reason: "skipped (--skip-scaling)"}
	} else {
		r.Scaling = runScaling(ctx, cfg)
	}
	r.Sandbox = runSandbox(ctx, cfg)
	peerWithLatency(ctx, cfg, lg, &r.Peer)
	r.compare()
	r.DurationS = time.Since(start).Seconds()
	fmt.Fprintf(cfg.Log, "bench: took %s (expected %s)\n", minutes(time.Since(start)), minutes(seconds(r.EstimatedS)))
	return r, r.write(cfg.OutDir)
}

// pointSizes says how long a repetition of a point is at each
// concurrency of cfg.
func pointSizes(cfg Config) string {
	var runs []string
	for _, c := range cfg.Concurrency {
		runs = append(runs, fmt.Sprintf("%d at c%d", runsAt(cfg.PointRuns, c), c))
	}
	s := "at least " + strings.Join(runs, ", ") + " runs"
	if cfg.PointTime > 0 {
		s += fmt.Sprintf(" and %s of load", cfg.PointTime)
	}
	return s + ", after a warm-up"
}

// contenders is every contender of the throughput points, in the order
// each repetition measures them: agentbus (default mode) over TCP and
// all-in-one, the skeleton runs, agentbus with sync_always, LangGraph and
// Restate.
func (r *Report) contenders(cfg Config, servers []*benchServer, lg *peer, rp *restatePeer) []*contender {
	var cs, synced []*contender
	for i := range r.Modes {
		mr, srv := &r.Modes[i], servers[i]
		if mr.Mode != modes[0].Name {
			synced = append(synced, agentbusContender(cfg, srv, mr, false))
			continue
		}
		cs = append(cs, agentbusContender(cfg, srv, mr, false), agentbusContender(cfg, srv, mr, true))
		for _, traffic := range skelTraffics {
			cs = append(cs, skeletonContender(cfg, srv, mr, traffic, true), skeletonContender(cfg, srv, mr, traffic, false))
		}
	}
	cs = append(cs, synced...)
	for _, cp := range checkpointers {
		cs = append(cs, langGraphContender(cfg, lg, &r.Peer, cp))
	}
	return append(cs, restateContender(cfg, rp, &r.Restate))
}

// runMode measures what a durability mode measures once, on its server:
// the floor, the hops, the LLM share, the supervisor, the budget, a long
// run and the census.
func runMode(ctx context.Context, cfg Config, srv *benchServer, mr *ModeReport) error {
	var err error
	step := func(what string) { fmt.Fprintf(cfg.Log, "bench:   %s\n", what) }
	step("floor: JetStream publish+PubAck, pull, ack")
	if mr.FloorInProc, err = floor(ctx, srv, false, cfg.FloorTrips); err != nil {
		return err
	}
	if mr.FloorTCP, err = floor(ctx, srv, true, cfg.FloorTrips); err != nil {
		return err
	}
	step("agentbus per hop: sequential 5-step runs")
	if mr.HopInProc, err = perHop(ctx, srv, false, cfg.HopRuns); err != nil {
		return err
	}
	if mr.HopTCP, err = perHop(ctx, srv, true, cfg.HopRuns); err != nil {
		return err
	}
	mr.OverheadP50 = ratio(mr.HopTCP.Hop.P50, mr.FloorTCP.P50)
	mr.OverheadP99 = ratio(mr.HopTCP.Hop.P99, mr.FloorTCP.P99)
	mr.OverheadInProcP50 = ratio(mr.HopInProc.Hop.P50, mr.FloorInProc.P50)
	mr.OverheadInProcP99 = ratio(mr.HopInProc.Hop.P99, mr.FloorInProc.P99)
	step(fmt.Sprintf("LLM share: model sleeping %s per call", cfg.LLMLatency))
	if mr.LLM, err = llmShare(ctx, srv, cfg.LLMLatency, cfg.LLMRuns); err != nil {
		return err
	}
	step(fmt.Sprintf("supervisor: %d lanes of %s skill latency against one lane", supervisorLanes, supervisorLatency))
	if mr.Supervisor, err = supervisorFanOut(ctx, srv, supervisorLanes, supervisorLatency, cfg.LLMRuns); err != nil {
		return err
	}
	step("budget: reserve and settle one model call's draw")
	if mr.BudgetDraw, err = budgetDraw(ctx, srv, cfg.FloorTrips/2); err != nil {
		return err
	}
	mr.BudgetDraw.RatioToHop = ratio(mr.BudgetDraw.Warm.P50, mr.HopTCP.Hop.P50)
	step(fmt.Sprintf("run length: a %d-iteration loop", cfg.Iterations))
	if mr.RunLength, err = runLength(ctx, srv, cfg.Iterations); err != nil {
		return err
	}
	step("census: what a run sends and stores")
	mr.Census, err = census(ctx, srv, cfg.HopRuns)
	return err
}

// preparePeers installs the peers (unless cfg skips them) and marks each
// report available, or says why it is not.
func preparePeers(ctx context.Context, cfg Config, r *Report) (*peer, *restatePeer) {
	if cfg.SkipPeer {
		r.Peer = PeerReport{Reason: "skipped (--skip-peer)"}
		r.Restate = RestateReport{Reason: "skipped (--skip-peer)"}
		return nil, nil
	}
	fmt.Fprintln(cfg.Log, "bench: LangGraph peer (installing into bench/.venv if needed)")
	lg, err := setupPeer(ctx, cfg.Root)
	if err != nil {
		r.Peer = PeerReport{Reason: err.Error()}
	} else {
		r.Peer = PeerReport{Available: true}
	}
	fmt.Fprintln(cfg.Log, "bench: Restate peer (installing into bench/.restate if needed)")
	rp, err := prepareRestate(ctx, cfg)
	switch {
	case err != nil && rp != nil:
		r.Restate = RestateReport{Reason: err.Error(), Version: rp.version}
	case err != nil:
		r.Restate = RestateReport{Reason: err.Error()}
	default:
		r.Restate = RestateReport{Available: true, Version: rp.version, StepsPerRun: restateSteps}
	}
	return lg, rp
}

// peerWithLatency measures LangGraph with SQLite and a model of
// cfg.LLMLatency a call, once, and sets the peer's version.
func peerWithLatency(ctx context.Context, cfg Config, lg *peer, pr *PeerReport) {
	if !pr.Available {
		return
	}
	if len(pr.Results) > 0 {
		pr.Version = pr.Results[0].Version
	}
	fmt.Fprintf(cfg.Log, "bench: LangGraph sqlite with %s of model latency a call\n", cfg.LLMLatency)
	if res, err := lg.measure(ctx, "sqlite", cfg.LLMRuns, fixed(cfg.LLMRuns), cfg.LLMRuns, int(cfg.LLMLatency.Milliseconds())); err == nil {
		pr.WithLatency = &res
	}
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

// runSandbox measures start-to-result latency of a trivial extraction
// script, in Python under the sandbox's isolation and in jq.
func runSandbox(ctx context.Context, cfg Config) SandboxReport {
	fmt.Fprintln(cfg.Log, "bench: sandbox start-to-result (python, jq)")
	sb, err := sandbox.New(sandbox.Config{})
	if err != nil {
		return SandboxReport{Reason: err.Error()}
	}
	n := 50
	if cfg.Quick {
		n = 5
	}
	py, jq, err := sandbox.BenchStartToResult(ctx, sb, n)
	if err != nil {
		return SandboxReport{Reason: err.Error()}
	}
	return SandboxReport{Isolation: sb.Isolation(), Runs: n, PythonP50: ms(py), JQP50: ms(jq)}
}
