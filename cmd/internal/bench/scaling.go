package bench

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/nats-io/nats-server/v2/server"

	"github.com/agentbus/agentbus/cmd/internal/app"
	"github.com/agentbus/agentbus/cmd/internal/bench/host"
	"github.com/agentbus/agentbus/cmd/internal/bench/pipeline"
	"github.com/agentbus/agentbus/cmd/internal/procs"
	"github.com/agentbus/agentbus/handlers"
)

// The executor scaling measurement (issue 17): executors as separate OS
// processes, each handling at most scalingPerProcess messages at once,
// against skills of scalingLatency served over MCP.
const (
	scalingLatency    = 50 * time.Millisecond
	scalingPerProcess = 2
	// scalingInFlight is the runs in flight per executor slot: enough to
	// keep every slot busy while the other roles work on the runs.
	scalingInFlight = 4
)

// ScalingPoint is the throughput of one count of executor processes.
type ScalingPoint struct {
	Processes   int     `json:"processes"`
	Concurrency int     `json:"concurrency"` // runs in flight
	Runs        int     `json:"runs"`
	RunsPerS    float64 `json:"runs_per_s"`
	Latency     Dist    `json:"run_latency"`
	Ratio       float64 `json:"ratio_to_one_process"`
	// CPUPerRunMS is the CPU time of this process (the other roles, the
	// nats-server, the Skill Service, the client) and of the executor
	// processes over the measured phase, per run.
	CPUPerRunMS float64 `json:"cpu_per_run_ms"`
}

// ScalingReport is the measured horizontal scaling of the executor role,
// or why it was not measured.
type ScalingReport struct {
	Reason         string         `json:"unavailable,omitempty"`
	SkillLatencyMS int            `json:"skill_latency_ms"`
	PerProcess     int            `json:"per_process_concurrency"`
	Points         []ScalingPoint `json:"points,omitempty"`
}

// Max returns the point with the most processes, and false when there is
// none.
func (s ScalingReport) Max() (ScalingPoint, bool) {
	if len(s.Points) == 0 {
		return ScalingPoint{}, false
	}
	best := s.Points[0]
	for _, p := range s.Points[1:] {
		if p.Processes > best.Processes {
			best = p
		}
	}
	return best, true
}

// scalingRatios sets each point's ratio of runs/s to the one-process
// point's (0 without one).
func scalingRatios(points []ScalingPoint) {
	var one float64
	for _, p := range points {
		if p.Processes == 1 {
			one = p.RunsPerS
		}
	}
	for i := range points {
		points[i].Ratio = ratio(points[i].RunsPerS, one)
	}
}

// runScaling measures runs/s with 1, 2, 4 (cfg.Executors) executor
// processes: the router, planner and aggregator run in this process on a
// default-mode server, the executors are the executor binary over TCP,
// and every skill call goes to an MCP Skill Service that sleeps 50 ms.
func runScaling(ctx context.Context, cfg Config) ScalingReport {
	sr := ScalingReport{SkillLatencyMS: int(scalingLatency.Milliseconds()), PerProcess: scalingPerProcess}
	fmt.Fprintf(cfg.Log, "bench: executor scaling: %v executor processes, %d messages at once each, %s skills over MCP\n",
		cfg.Executors, scalingPerProcess, scalingLatency)
	bin, cleanup, err := binary(ctx, cfg.BinDir, "", "executor", procs.Module+"/cmd/executor")
	if err != nil {
		sr.Reason = err.Error()
		return sr
	}
	defer cleanup()
	if sr.Points, err = measureScaling(ctx, cfg, bin); err != nil {
		sr.Reason = err.Error()
		sr.Points = nil
	}
	scalingRatios(sr.Points)
	return sr
}

func measureScaling(ctx context.Context, cfg Config, bin string) ([]ScalingPoint, error) {
	srv, err := startServer(modes[0])
	if err != nil {
		return nil, err
	}
	defer srv.close()
	sk, err := pipeline.StartServer(scalingLatency)
	if err != nil {
		return nil, err
	}
	defer sk.Close()
	d, err := deploy(ctx, srv, deployConfig{tcp: true, externalExecutors: true, model: newPipelineModel(), skillLatency: scalingLatency})
	if err != nil {
		return nil, err
	}
	defer d.close()
	env := []string{"NATS_URL=" + srv.srv.ClientURL(), "SKILL_SERVICE_URL=" + sk.URL, "SKILL_MODE=skill-service",
		"MODEL=offline", "STORE=embedded", "LOG_LEVEL=warn", fmt.Sprintf("CONCURRENCY=%d", scalingPerProcess)}
	var points []ScalingPoint
	for _, n := range cfg.Executors {
		fmt.Fprintf(cfg.Log, "bench:   %d executor process(es)\n", n)
		p, err := scalingPoint(ctx, d, bin, env, n, cfg.Quick)
		if err != nil {
			return nil, fmt.Errorf("%d executor processes: %w", n, err)
		}
		points = append(points, p)
	}
	return points, nil
}

// scalingPoint starts n executor processes, waits until each pulls from
// the executor consumer, warms them up and measures a closed loop.
func scalingPoint(ctx context.Context, d *deployment, bin string, env []string, n int, quick bool) (ScalingPoint, error) {
	var started []*procs.Proc
	var logs []*procs.Buffer
	defer func() {
		for _, p := range started {
			p.Stop(syscall.SIGTERM, 10*time.Second)
		}
	}()
	for i := range n {
		buf := &procs.Buffer{}
		p, err := procs.Start(procs.Spec{Name: fmt.Sprintf("executor-%d", i+1), Path: bin, Env: env, Output: buf})
		if err != nil {
			return ScalingPoint{}, err
		}
		started, logs = append(started, p), append(logs, buf)
	}
	failed := func(err error) error {
		for i, p := range started {
			if p.Exited() {
				return fmt.Errorf("%w; %s exited: %s", err, p.Name, lastLine(logs[i].String()))
			}
		}
		return err
	}
	if err := waitPulling(ctx, d, n); err != nil {
		return ScalingPoint{}, failed(err)
	}
	conc := scalingInFlight * scalingPerProcess * n
	total := 12 * conc
	if quick {
		total = 3 * conc
	}
	if _, _, err := closedLoop(ctx, d, conc, fixed(conc)); err != nil { // warm-up
		return ScalingPoint{}, failed(err)
	}
	cpu0 := host.ProcessCPU() + childrenCPU(started)
	lat, elapsed, err := closedLoop(ctx, d, conc, fixed(total))
	cpu := host.ProcessCPU() + childrenCPU(started) - cpu0
	if err != nil {
		return ScalingPoint{}, failed(err)
	}
	return ScalingPoint{Processes: n, Concurrency: conc, Runs: total, RunsPerS: float64(total) / elapsed.Seconds(), Latency: distOf(lat),
		CPUPerRunMS: float64(cpu.Microseconds()) / 1000 / float64(total)}, nil
}

// waitPulling waits until n executor processes are connected and the
// executor consumer has at least n waiting pull requests.
func waitPulling(ctx context.Context, d *deployment, n int) error {
	role, _ := app.RoleNamed(handlers.RoleExecutor)
	c := role.Consumer()
	deadline := time.Now().Add(30 * time.Second)
	for ; time.Now().Before(deadline) && ctx.Err() == nil; time.Sleep(100 * time.Millisecond) {
		if connected(d.srv, "agentbus-executor") < n {
			continue
		}
		cons, err := d.js.Consumer(ctx, c.Stream, c.Name)
		if err != nil {
			continue
		}
		if info, err := cons.Info(ctx); err == nil && info.NumWaiting >= n {
			return nil
		}
	}
	return fmt.Errorf("%d executor processes not connected and pulling after 30 s", n)
}

// connected counts the server's client connections named name.
func connected(srv *benchServer, name string) int {
	cz, err := srv.srv.Connz(&server.ConnzOptions{Limit: 1024})
	if err != nil {
		return 0
	}
	count := 0
	for _, ci := range cz.Conns {
		if ci.Name == name {
			count++
		}
	}
	return count
}

// binary finds the binary name in dir (default: beside this executable,
// where make build puts it), or builds pkg, in the module that contains
// moduleDir (the current directory's when empty), into a temporary
// directory that cleanup removes.
func binary(ctx context.Context, dir, moduleDir, name, pkg string) (path string, cleanup func(), err error) {
	if dir == "" {
		if exe, err := os.Executable(); err == nil {
			dir = filepath.Dir(exe)
		}
	}
	if p := filepath.Join(dir, name); dir != "" && isExecutable(p) {
		return p, func() {}, nil
	}
	tmp, err := os.MkdirTemp("", "agentbus-bench-bin-")
	if err != nil {
		return "", nil, err
	}
	if err := procs.BuildIn(ctx, moduleDir, tmp, pkg); err != nil {
		os.RemoveAll(tmp)
		return "", nil, fmt.Errorf("no %s binary in %s and building one failed: %s", name, dir, firstLine(err.Error()))
	}
	return filepath.Join(tmp, name), func() { os.RemoveAll(tmp) }, nil
}

// childrenCPU is the user plus system CPU time the running processes
// have used, from /proc (0 where it cannot be read).
func childrenCPU(ps []*procs.Proc) time.Duration {
	var sum time.Duration
	for _, p := range ps {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", p.Pid()))
		if err != nil {
			continue
		}
		sum += statCPU(string(b))
	}
	return sum
}

// statCPU parses utime and stime (fields 14 and 15, in clock ticks of
// 1/100 s) from a /proc/<pid>/stat line.
func statCPU(stat string) time.Duration {
	// The command name, field 2, is in parentheses and may hold spaces.
	i := strings.LastIndexByte(stat, ')')
	if i < 0 {
		return 0
	}
	f := strings.Fields(stat[i+1:]) // f[0] is field 3
	if len(f) < 13 {
		return 0
	}
	var ticks int64
	for _, s := range f[11:13] {
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return 0
		}
		ticks += n
	}
	return time.Duration(ticks) * 10 * time.Millisecond
}

func isExecutable(p string) bool {
	st, err := os.Stat(p)
	return err == nil && !st.IsDir() && st.Mode()&0o111 != 0
}

func firstLine(s string) string {
	s, _, _ = strings.Cut(strings.TrimSpace(s), "\n")
	return s
}
