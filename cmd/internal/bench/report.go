package bench

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	json "github.com/go-json-experiment/json/v1"
)

// Machine describes where the figures came from.
type Machine struct {
	CPU      string `json:"cpu"`
	Cores    int    `json:"cores"`
	GOOS     string `json:"goos"`
	GOARCH   string `json:"goarch"`
	Go       string `json:"go"`
	Hostname string `json:"hostname"`
}

// ModeReport holds every figure of one durability mode.
type ModeReport struct {
	Mode              string       `json:"mode"`
	FloorInProc       Dist         `json:"floor_inprocess"`
	FloorTCP          Dist         `json:"floor_tcp"`
	HopInProc         hopResult    `json:"hop_inprocess"`
	HopTCP            hopResult    `json:"hop_tcp"`
	OverheadP50       float64      `json:"overhead_ratio_p50"`
	OverheadP99       float64      `json:"overhead_ratio_p99"`
	OverheadInProcP50 float64      `json:"overhead_ratio_inprocess_p50"`
	OverheadInProcP99 float64      `json:"overhead_ratio_inprocess_p99"`
	Throughput        []Throughput `json:"throughput"`
	// AllInOne is the throughput of the all-in-one's wiring: every role
	// connected to the embedded server in memory rather than over TCP
	// (default mode only).
	AllInOne   []Throughput     `json:"all_in_one_throughput,omitempty"`
	LLM        LLMShare         `json:"llm_share"`
	RunLength  RunLength        `json:"run_length"`
	Supervisor SupervisorFanOut `json:"supervisor"`
	BudgetDraw BudgetDraw       `json:"budget_draw"`
	Census     Census           `json:"census"`
	// Skeleton is the skeleton runs' throughput (default mode only):
	// a run's traffic with handlers that do nothing (see skeleton.go).
	Skeleton []SkeletonPoint `json:"skeleton,omitempty"`
}

// SkeletonPoint is one load point of skeleton runs.
type SkeletonPoint struct {
	Traffic     string `json:"traffic"`     // a skelTraffic's name: "census" or "minimum"
	Connections string `json:"connections"` // deploymentTCP or connectionsInMemory
	Throughput
}

// deployment is the Comparison deployment of the skeleton point.
func (p SkeletonPoint) deployment() string {
	return "skeleton_" + p.Traffic + "_" + p.Connections
}

// skeletonHopOverhead is a skeleton hop's share of a sequential skeleton
// run's p50 over TCP, against the TCP floor: the overhead ratio no
// agentbus hop making that traffic can go below. Zero without a c1
// point.
func (m ModeReport) skeletonHopOverhead(traffic string) float64 {
	for _, p := range m.Skeleton {
		if p.Traffic == traffic && p.Connections == deploymentTCP && p.Concurrency == 1 {
			return ratio(p.Latency.P50/skelHops, m.FloorTCP.P50)
		}
	}
	return 0
}

// PeerReport holds the LangGraph figures, or why there are none.
type PeerReport struct {
	Available   bool         `json:"available"`
	Reason      string       `json:"reason,omitempty"`
	Version     string       `json:"version,omitempty"`
	Results     []PeerResult `json:"results,omitempty"`
	WithLatency *PeerResult  `json:"with_model_latency,omitempty"`
}

// SandboxReport is the start-to-result latency of trivial extraction scripts.
type SandboxReport struct {
	Isolation string  `json:"isolation,omitempty"`
	Runs      int     `json:"runs,omitempty"`
	PythonP50 float64 `json:"python_p50_ms,omitempty"`
	JQP50     float64 `json:"jq_p50_ms,omitempty"`
	Reason    string  `json:"unavailable,omitempty"`
}

// Comparison is agentbus over LangGraph at one concurrency.
type Comparison struct {
	// Deployment is how agentbus's roles were connected: "tcp" (as
	// separate processes are) or "all_in_one" (in memory).
	Deployment   string  `json:"deployment"`
	Checkpointer string  `json:"checkpointer"`
	Concurrency  int     `json:"concurrency"`
	RunsPerS     float64 `json:"runs_per_s_ratio"`  // agentbus / LangGraph
	P50Speedup   float64 `json:"p50_latency_ratio"` // LangGraph p50 / agentbus p50
}

// Report is the whole benchmark result.
type Report struct {
	Time        time.Time           `json:"time"`
	Machine     Machine             `json:"machine"`
	Quick       bool                `json:"quick"`
	Modes       []ModeReport        `json:"modes"`
	Scaling     ScalingReport       `json:"executor_scaling"`
	Sandbox     SandboxReport       `json:"sandbox"`
	Peer        PeerReport          `json:"langgraph"`
	Comparisons []Comparison        `json:"vs_langgraph"`
	Restate     RestateReport       `json:"restate"`
	VsRestate   []RestateComparison `json:"vs_restate"`
	Summary     string              `json:"summary"`
	written     string              // the directory write wrote to
}

// compare computes the LangGraph ratios (default mode, one executor) and
// the summary line.
func (r *Report) compare() {
	if len(r.Modes) == 0 {
		return
	}
	m := r.Modes[0]
	ours, aio := oneExecutor(m.Throughput), oneExecutor(m.AllInOne)
	maxC := 0
	for c := range ours {
		maxC = max(maxC, c)
	}
	var vs []string // every LangGraph ratio, for the summary line
	type deployed struct {
		name, prefix string
		tps          map[int]Throughput
	}
	sets := []deployed{{deploymentTCP, "", ours}, {deploymentAllInOne, "all_in_one_", aio}}
	for _, traffic := range skelTraffics {
		tps := map[int]Throughput{}
		for _, p := range m.Skeleton {
			if p.Traffic == traffic.name && p.Connections == deploymentTCP {
				tps[p.Concurrency] = p.Throughput
			}
		}
		sets = append(sets, deployed{SkeletonPoint{Traffic: traffic.name, Connections: deploymentTCP}.deployment(), "skeleton_" + traffic.name + "_", tps})
	}
	for _, d := range sets {
		for _, pr := range r.Peer.Results {
			tp, ok := d.tps[pr.Concurrency]
			if !ok {
				continue
			}
			c := Comparison{Deployment: d.name, Checkpointer: pr.Checkpointer, Concurrency: pr.Concurrency,
				RunsPerS: ratio(tp.RunsPerS, pr.RunsPerS), P50Speedup: ratio(pr.P50, tp.Latency.P50)}
			r.Comparisons = append(r.Comparisons, c)
			vs = append(vs, fmt.Sprintf("%svs_langgraph_%s_c%d=%.2fx", d.prefix, pr.Checkpointer, pr.Concurrency, c.RunsPerS))
		}
	}
	if len(vs) == 0 {
		vs = []string{unavailable("vs_langgraph", r.Peer.Reason, "langgraph-unavailable:")}
	}
	r.VsRestate = compareRestate(r.Modes, r.Restate)
	vs = append(vs, restateSummary(r.Restate, r.VsRestate))
	skel := ""
	for _, traffic := range skelTraffics {
		if o := m.skeletonHopOverhead(traffic.name); o > 0 {
			skel += fmt.Sprintf(" skeleton_%s_overhead_ratio_p50=%.2f", traffic.name, o)
		}
	}
	r.Summary = fmt.Sprintf("overhead_ratio_p50=%.2f%s runs_per_s_c%d=%.1f %s supervisor_%d_lanes_speedup=%.1fx budget_draw_per_call_vs_hop=%.2f %s",
		m.OverheadP50, skel, maxC, ours[maxC].RunsPerS, r.Scaling.summary(), m.Supervisor.Lanes, m.Supervisor.Speedup, m.BudgetDraw.RatioToHop, strings.Join(vs, " "))
}

// The deployments a Comparison names.
const (
	deploymentTCP      = "tcp"
	deploymentAllInOne = "all_in_one"
)

// connectionsInMemory names skeleton points connected in memory, like
// the all-in-one.
const connectionsInMemory = "in_memory"

// skelTraffics are the skeleton runs' traffics, in the report's order.
var skelTraffics = []skelTraffic{skelCensus, skelMinimum}

// oneExecutor is the one-executor load points of tps by concurrency.
func oneExecutor(tps []Throughput) map[int]Throughput {
	by := map[int]Throughput{}
	for _, tp := range tps {
		if tp.Executors == 1 {
			by[tp.Concurrency] = tp
		}
	}
	return by
}

// times prints a ratio, or "-" for one not measured.
func times(x float64) string {
	if x == 0 {
		return "-"
	}
	return fmt.Sprintf("%.2fx", x)
}

// comparison is the comparison of a deployment with the peer result pr
// (zero when that deployment was not measured at its concurrency).
func (r *Report) comparison(deployment string, pr PeerResult) Comparison {
	for _, c := range r.Comparisons {
		if c.Deployment == deployment && c.Checkpointer == pr.Checkpointer && c.Concurrency == pr.Concurrency {
			return c
		}
	}
	return Comparison{}
}

// unavailable is a summary field saying a measurement is missing and why,
// the reason quoted (logfmt style) without its redundant prefix.
func unavailable(key, reason, prefix string) string {
	reason = strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(reason), prefix))
	if reason == "" {
		return key + "=unavailable"
	}
	return key + "=" + strconv.Quote("unavailable: "+reason)
}

// summary is the scaling's field of the summary line.
func (s ScalingReport) summary() string {
	if p, ok := s.Max(); ok {
		return fmt.Sprintf("executor_scaling_%dp=%.1fx", p.Processes, p.Ratio)
	}
	return unavailable("executor_scaling", s.Reason, "")
}

// print writes the scaling table.
func (s ScalingReport) print(w io.Writer) {
	if s.Reason != "" {
		fmt.Fprintf(w, "\n== executor processes ==\nnot measured: %s\n", s.Reason)
		return
	}
	fmt.Fprintf(w, "\n== executor processes: %d ms skills over MCP, %d messages at once per process ==\n", s.SkillLatencyMS, s.PerProcess)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "processes\truns in flight\truns/s\trun p50 ms\trun p99 ms\tCPU ms/run\truns/s / one process")
	for _, p := range s.Points {
		fmt.Fprintf(tw, "%d\t%d\t%.1f\t%.0f\t%.0f\t%.1f\t%.2fx\n", p.Processes, p.Concurrency, p.RunsPerS, p.Latency.P50, p.Latency.P99, p.CPUPerRunMS, p.Ratio)
	}
	tw.Flush()
}

// printSkeleton writes the skeleton runs' table: each point beside
// agentbus's at the same concurrency and connections.
func (m ModeReport) printSkeleton(w io.Writer) {
	if len(m.Skeleton) == 0 {
		return
	}
	fmt.Fprintf(w, "skeleton runs (a run's traffic, handlers doing nothing else; census: as agentbus sends it, minimum: less than the design allows):\n")
	ours := map[string]map[int]Throughput{deploymentTCP: oneExecutor(m.Throughput), connectionsInMemory: oneExecutor(m.AllInOne)}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "traffic\tconnections\tconcurrency\truns/s\trun p50 ms\tCPU ms/run\tagentbus/skeleton runs/s")
	for _, p := range m.Skeleton {
		fmt.Fprintf(tw, "%s\t%s\t%d\t%.1f\t%.1f\t%.2f\t%s\n", p.Traffic, p.Connections, p.Concurrency, p.RunsPerS, p.Latency.P50, p.CPUPerRunMS,
			times(ratio(ours[p.Connections][p.Concurrency].RunsPerS, p.RunsPerS)))
	}
	tw.Flush()
	for _, traffic := range skelTraffics {
		if o := m.skeletonHopOverhead(traffic.name); o > 0 {
			fmt.Fprintf(w, "skeleton %s hop (sequential run p50 / %d hops, TCP) over the floor: %.2f\n", traffic.name, skelHops, o)
		}
	}
}

// printRestate writes the Restate table.
func (r *Report) printRestate(w io.Writer) {
	fmt.Fprintf(w, "\n== Restate peer %s, same 5-step plan as durable steps (%d journaled per run), zero latency ==\n",
		strings.TrimSpace("restate-server "+r.Restate.Version), restateSteps)
	if !r.Restate.Available {
		fmt.Fprintf(w, "not measured: %s\n", r.Restate.Reason)
		return
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "concurrency\truns/s\trun p50 ms\trun p99 ms")
	for _, res := range r.Restate.Results {
		fmt.Fprintf(tw, "%d\t%.1f\t%.1f\t%.1f\n", res.Concurrency, res.RunsPerS, res.Latency.P50, res.Latency.P99)
	}
	tw.Flush()
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "agentbus mode\tconcurrency\tagentbus/Restate runs/s\tagentbus/Restate p50")
	for _, c := range r.VsRestate {
		fmt.Fprintf(tw, "%s\t%d\t%.2fx\t%.2fx\n", c.Mode, c.Concurrency, c.RunsPerS, c.P50)
	}
	tw.Flush()
}

// write saves the JSON report and the chart under dir.
func (r *Report) write(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	r.written = dir
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "bench.json"), b, 0o644); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, "latency.svg"), []byte(r.chart()), 0o644)
}

// Print writes the human-readable tables, ending with the summary line.
func (r *Report) Print(w io.Writer) {
	fmt.Fprintf(w, "\nagentbus bench — %s, %d cores, %s\n", r.Machine.CPU, r.Machine.Cores, r.Machine.Go)
	for _, m := range r.Modes {
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		fmt.Fprintf(w, "\n== durability mode: %s ==\n", m.Mode)
		fmt.Fprintln(tw, "measure\tp50 ms\tp99 ms\tn")
		row := func(name string, d Dist) { fmt.Fprintf(tw, "%s\t%.3f\t%.3f\t%d\n", name, d.P50, d.P99, d.N) }
		row("floor: JetStream round trip, in-process", m.FloorInProc)
		row("floor: JetStream round trip, TCP", m.FloorTCP)
		row("agentbus per hop, in-process", m.HopInProc.Hop)
		row("agentbus per hop, TCP", m.HopTCP.Hop)
		row(fmt.Sprintf("agentbus 5-step run (%.0f hops), TCP", m.HopTCP.HopsPerRun), m.HopTCP.Run)
		tw.Flush()
		fmt.Fprintf(w, "overhead ratio (hop / floor): TCP p50 %.2f, p99 %.2f; in-process p50 %.2f, p99 %.2f\n",
			m.OverheadP50, m.OverheadP99, m.OverheadInProcP50, m.OverheadInProcP99)
		tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "executors\tconcurrency\truns/s\thops/s\trun p50 ms\trun p99 ms\tCPU ms/run\tprojector lag ms\tconnections")
		for _, set := range []struct {
			connections string
			tps         []Throughput
		}{{"TCP", m.Throughput}, {"all-in-one, in memory", m.AllInOne}} {
			for _, tp := range set.tps {
				fmt.Fprintf(tw, "%d\t%d\t%.1f\t%.0f\t%.1f\t%.1f\t%.1f\t%.0f\t%s\n", tp.Executors, tp.Concurrency, tp.RunsPerS, tp.HopsPerS,
					tp.Latency.P50, tp.Latency.P99, tp.CPUPerRunMS, tp.ProjectorLagMS, set.connections)
			}
		}
		tw.Flush()
		fmt.Fprintf(w, "LLM share at %d ms per call (%d calls/run, %d runs): %.2f%% of run time in the model; outside the model p50 %.1f ms per run\n",
			m.LLM.ModelLatencyMS, m.LLM.ModelCalls, m.LLM.Runs, 100*m.LLM.Share, m.LLM.OutsideMS.P50)
		sv := m.Supervisor
		fmt.Fprintf(w, "supervisor: %d lanes of %d ms skill latency p50 %.0f ms, one lane p50 %.0f ms: %.1fx faster than %d lanes one after another\n",
			sv.Lanes, sv.SkillLatencyMS, sv.LanesMS.P50, sv.OneLaneMS.P50, sv.Speedup, sv.Lanes)
		bd := m.BudgetDraw
		fmt.Fprintf(w, "budget per call (reserve + settle): p50 %.3f ms from the run state, %.3f ms for a lane topping up from its group's pool (TCP): %.2f of a hop's p50\n",
			bd.Warm.P50, bd.Cold.P50, bd.RatioToHop)
		fmt.Fprintf(w, "run length: hop p50 %.3f ms over iterations 1-%d, %.3f ms over the last %d of %d (ratio %.2f)\n",
			m.RunLength.Early.P50, m.RunLength.Window, m.RunLength.Late.P50, m.RunLength.Window, m.RunLength.Iterations, m.RunLength.Ratio)
		m.Census.print(w)
		m.printSkeleton(w)
	}
	r.Scaling.print(w)
	if r.Sandbox.Reason != "" {
		fmt.Fprintf(w, "\nsandbox: not measured: %s\n", r.Sandbox.Reason)
	} else {
		fmt.Fprintf(w, "\nsandbox start-to-result p50 (%s, %d runs): exec_python %.1f ms, exec_jq %.1f ms\n",
			r.Sandbox.Isolation, r.Sandbox.Runs, r.Sandbox.PythonP50, r.Sandbox.JQP50)
	}
	fmt.Fprintln(w, "\n== LangGraph peer, same 5-step plan, fake LLM with no latency ==")
	if !r.Peer.Available {
		fmt.Fprintf(w, "not measured: %s\n", r.Peer.Reason)
	} else {
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "checkpointer\tconcurrency\truns/s\trun p50 ms\tagentbus/LangGraph runs/s\tLangGraph/agentbus p50\tall-in-one/LangGraph runs/s\tLangGraph/all-in-one p50\tskeleton census/LangGraph runs/s\tskeleton minimum/LangGraph runs/s")
		for _, pr := range r.Peer.Results {
			tcp, aio := r.comparison(deploymentTCP, pr), r.comparison(deploymentAllInOne, pr)
			census := r.comparison(SkeletonPoint{Traffic: skelCensus.name, Connections: deploymentTCP}.deployment(), pr)
			minimum := r.comparison(SkeletonPoint{Traffic: skelMinimum.name, Connections: deploymentTCP}.deployment(), pr)
			fmt.Fprintf(tw, "%s\t%d\t%.1f\t%.1f\t%s\t%s\t%s\t%s\t%s\t%s\n", pr.Checkpointer, pr.Concurrency, pr.RunsPerS, pr.P50,
				times(tcp.RunsPerS), times(tcp.P50Speedup), times(aio.RunsPerS), times(aio.P50Speedup), times(census.RunsPerS), times(minimum.RunsPerS))
		}
		tw.Flush()
		if wl := r.Peer.WithLatency; wl != nil {
			fmt.Fprintf(w, "LangGraph sqlite with %d ms model latency: run p50 %.0f ms (%d model calls/run)\n", wl.LatencyMS, wl.P50, wl.ModelCalls)
		}
	}
	r.printRestate(w)
	if r.written != "" {
		fmt.Fprintf(w, "\nwritten: %s, %s\n", filepath.Join(r.written, "bench.json"), filepath.Join(r.written, "latency.svg"))
	}
	fmt.Fprintf(w, "\n%s\n", r.Summary)
}
