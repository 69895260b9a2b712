package bench

import (
	"context"
	"fmt"
	"io"
	"os"
	"runtime"
	"strings"
	"time"

	"github.com/agentbus/agentbus/sandbox"
)

// The supervisor measurement: 10 lanes of 100 ms skill latency (issue 12).
const (
	supervisorLanes   = 10
	supervisorLatency = 100 * time.Millisecond
)

// Config sizes a benchmark run.
type Config struct {
	Root          string // repository root (for bench/langgraph); default "."
	OutDir        string // JSON and chart; default bench/out
	Quick         bool   // small samples, for tests
	SkipPeer      bool   // measure neither LangGraph nor Restate
	SkipScaling   bool   // do not measure executor processes
	BinDir        string // where the executor and restatepeer binaries are; default beside this executable
	FloorTrips    int
	HopRuns       int
	Concurrency   []int
	Executors     []int
	LLMLatency    time.Duration
	LLMRuns       int
	Iterations    int
	Log           io.Writer // progress; default stderr
	ModesToRun    []string  // default both
	ThroughputMin int       // minimum runs per throughput point
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
	set(&c.ThroughputMin, 30, 4)
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

// Run measures everything and writes the report.
func Run(ctx context.Context, cfg Config) (*Report, error) {
	cfg.defaults()
	r := &Report{Time: time.Now().UTC(), Machine: machine(), Quick: cfg.Quick}
	for _, m := range modes {
		if len(cfg.ModesToRun) > 0 && !contains(cfg.ModesToRun, m.Name) {
			continue
		}
		fmt.Fprintf(cfg.Log, "bench: durability mode %s\n", m.Name)
		mr, err := runMode(ctx, cfg, m)
		if err != nil {
			return nil, fmt.Errorf("mode %s: %w", m.Name, err)
		}
		r.Modes = append(r.Modes, *mr)
	}
	if cfg.SkipScaling {
		r.Scaling = ScalingReport{Reason: "skipped (--skip-scaling)"}
	} else {
		r.Scaling = runScaling(ctx, cfg)
	}
	r.Sandbox = runSandbox(ctx, cfg)
	r.Peer = runPeer(ctx, cfg)
	r.Restate = runRestate(ctx, cfg)
	r.compare()
	return r, r.write(cfg.OutDir)
}

func runMode(ctx context.Context, cfg Config, m mode) (*ModeReport, error) {
	srv, err := startServer(m)
	if err != nil {
		return nil, err
	}
	defer srv.close()
	mr := &ModeReport{Mode: m.Name}
	step := func(what string) { fmt.Fprintf(cfg.Log, "bench:   %s\n", what) }
	step("floor: JetStream publish+PubAck, pull, ack")
	if mr.FloorInProc, err = floor(ctx, srv, false, cfg.FloorTrips); err != nil {
		return nil, err
	}
	if mr.FloorTCP, err = floor(ctx, srv, true, cfg.FloorTrips); err != nil {
		return nil, err
	}
	step("agentbus per hop: sequential 5-step runs")
	if mr.HopInProc, err = perHop(ctx, srv, false, cfg.HopRuns); err != nil {
		return nil, err
	}
	if mr.HopTCP, err = perHop(ctx, srv, true, cfg.HopRuns); err != nil {
		return nil, err
	}
	mr.OverheadP50 = ratio(mr.HopTCP.Hop.P50, mr.FloorTCP.P50)
	mr.OverheadP99 = ratio(mr.HopTCP.Hop.P99, mr.FloorTCP.P99)
	mr.OverheadInProcP50 = ratio(mr.HopInProc.Hop.P50, mr.FloorInProc.P50)
	mr.OverheadInProcP99 = ratio(mr.HopInProc.Hop.P99, mr.FloorInProc.P99)
	for _, ex := range cfg.Executors {
		for _, c := range cfg.Concurrency {
			step(fmt.Sprintf("throughput: %d executor(s), concurrency %d", ex, c))
			tp, err := throughput(ctx, srv, ex, c, max(cfg.ThroughputMin, 3*c), mr.HopTCP.HopsPerRun, false)
			if err != nil {
				return nil, err
			}
			mr.Throughput = append(mr.Throughput, tp)
			if ex != 1 || m.SyncAlways {
				continue
			}
			// The all-in-one (agentbus up, make run): every role in one
			// process, connected to its embedded server in memory;
			// measured beside the same point over TCP.
			step(fmt.Sprintf("throughput, all-in-one (in-memory connections): concurrency %d", c))
			if tp, err = throughput(ctx, srv, 1, c, max(cfg.ThroughputMin, 3*c), mr.HopTCP.HopsPerRun, true); err != nil {
				return nil, err
			}
			mr.AllInOne = append(mr.AllInOne, tp)
		}
	}
	if !m.SyncAlways {
		for _, traffic := range skelTraffics {
			for _, c := range cfg.Concurrency {
				for _, tcp := range []bool{true, false} {
					p := SkeletonPoint{Traffic: traffic.name, Connections: deploymentTCP}
					if !tcp {
						p.Connections = connectionsInMemory
					}
					step(fmt.Sprintf("skeleton runs: %s traffic, %s, concurrency %d", p.Traffic, p.Connections, c))
					if p.Throughput, err = skeleton(ctx, srv, traffic, tcp, c, 4*max(cfg.ThroughputMin, 3*c)); err != nil { // a skeleton run is cheap: more of them, steadier figures
						return nil, err
					}
					mr.Skeleton = append(mr.Skeleton, p)
				}
			}
		}
	}
	step(fmt.Sprintf("LLM share: model sleeping %s per call", cfg.LLMLatency))
	if mr.LLM, err = llmShare(ctx, srv, cfg.LLMLatency, cfg.LLMRuns); err != nil {
		return nil, err
	}
	step(fmt.Sprintf("supervisor: %d lanes of %s skill latency against one lane", supervisorLanes, supervisorLatency))
	if mr.Supervisor, err = supervisorFanOut(ctx, srv, supervisorLanes, supervisorLatency, cfg.LLMRuns); err != nil {
		return nil, err
	}
	step("budget: reserve and settle one model call's draw")
	if mr.BudgetDraw, err = budgetDraw(ctx, srv, cfg.FloorTrips/2); err != nil {
		return nil, err
	}
	mr.BudgetDraw.RatioToHop = ratio(mr.BudgetDraw.Warm.P50, mr.HopTCP.Hop.P50)
	step(fmt.Sprintf("run length: a %d-iteration loop", cfg.Iterations))
	if mr.RunLength, err = runLength(ctx, srv, cfg.Iterations); err != nil {
		return nil, err
	}
	step("census: what a run sends and stores")
	if mr.Census, err = census(ctx, srv, cfg.HopRuns); err != nil {
		return nil, err
	}
	return mr, nil
}

func runPeer(ctx context.Context, cfg Config) PeerReport {
	if cfg.SkipPeer {
		return PeerReport{Reason: "skipped (--skip-peer)"}
	}
	fmt.Fprintln(cfg.Log, "bench: LangGraph peer (installing into bench/.venv if needed)")
	p, err := setupPeer(ctx, cfg.Root)
	if err != nil {
		return PeerReport{Reason: err.Error()}
	}
	pr := PeerReport{Available: true}
	for _, cp := range []string{"memory", "sqlite"} {
		for _, c := range cfg.Concurrency {
			res, err := p.measure(ctx, cp, c, max(cfg.ThroughputMin, 3*c), 0)
			if err != nil {
				return PeerReport{Reason: err.Error()}
			}
			pr.Results = append(pr.Results, res)
		}
	}
	if res, err := p.measure(ctx, "sqlite", cfg.LLMRuns, cfg.LLMRuns, int(cfg.LLMLatency.Milliseconds())); err == nil {
		pr.WithLatency = &res
	}
	if len(pr.Results) > 0 {
		pr.Version = pr.Results[0].Version
	}
	return pr
}

func machine() Machine {
	m := Machine{Cores: runtime.NumCPU(), GOOS: runtime.GOOS, GOARCH: runtime.GOARCH, Go: runtime.Version()}
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			if name, ok := strings.CutPrefix(line, "model name"); ok {
				m.CPU = strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(name), ":"))
				break
			}
		}
	}
	m.Hostname, _ = os.Hostname()
	return m
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
