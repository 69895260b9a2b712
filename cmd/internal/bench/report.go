package bench

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	json "github.com/go-json-experiment/json/v1"

	"github.com/agentbus/agentbus/cmd/internal/bench/host"
)

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
	RunsPerS     float64 `json:"runs_per_s_ratio"`  // agentbus / LangGraph, of the medians
	P50Speedup   float64 `json:"p50_latency_ratio"` // LangGraph p50 / agentbus p50
	// RunsPerSRange is the lowest and highest runs/s ratio of a
	// repetition of agentbus to the LangGraph repetition measured next
	// to it (zero with a single repetition).
	RunsPerSRange Range `json:"runs_per_s_ratio_range"`
}

// Report is the whole benchmark result.
type Report struct {
	Time        time.Time           `json:"time"`
	Machine     host.Machine        `json:"machine"`
	Quick       bool                `json:"quick"`
	Modes       []ModeReport        `json:"modes"`
	Scaling     ScalingReport       `json:"executor_scaling"`
	Sandbox     SandboxReport       `json:"sandbox"`
	Peer        PeerReport          `json:"langgraph"`
	Comparisons []Comparison        `json:"vs_langgraph"`
	Restate     RestateReport       `json:"restate"`
	VsRestate   []RestateComparison `json:"vs_restate"`
	Summary     string              `json:"summary"`
	// Repetitions of every throughput point; EstimatedS the duration
	// expected at the start, DurationS the one taken.
	Repetitions int     `json:"repetitions"`
	EstimatedS  float64 `json:"estimated_duration_s"`
	DurationS   float64 `json:"duration_s"`
	written     string  // the directory write wrote to
}

// compare computes the LangGraph ratios (default mode, one executor) and
// the summary line.
//
// Every ratio, here and in the summary line, is the median runs/s of
// agentbus over the median runs/s of the peer, each over the point's
// repetitions (the ratio of the medians, not the median of the
// repetitions' ratios: the figures the tables print give it again). The
// lowest and highest ratio of a repetition to the peer's repetition
// measured next to it go beside it (RunsPerSRange), to show how far it
// holds.
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
				RunsPerS: ratio(tp.RunsPerS, pr.RunsPerS), P50Speedup: ratio(pr.P50, tp.Latency.P50), RunsPerSRange: pairedRatios(tp.Reps, pr.Reps)}
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
	r.Summary = fmt.Sprintf("overhead_ratio_p50=%.2f%s runs_per_s_c%d=%.1f %s supervisor_%d_lanes_speedup=%.1fx budget_draw_per_call_vs_hop=%.2f%s %s repetitions=%d",
		m.OverheadP50, skel, maxC, ours[maxC].RunsPerS, r.Scaling.summary(), m.Supervisor.Lanes, m.Supervisor.Speedup, m.BudgetDraw.RatioToHop,
		m.Census.summary(), strings.Join(vs, " "), r.repetitions())
}

// summary is the census's fields of the summary line: the records a
// sequential run stores (its durable writes) and the messages its
// clients send, and the bytes those messages carry.
func (c Census) summary() string {
	if c.Runs == 0 {
		return ""
	}
	return fmt.Sprintf(" durable_writes_per_run=%.1f client_messages_per_run=%.1f client_kib_per_run=%.1f", c.Records, c.Sent, c.Bytes/1024)
}

// repetitions is the most repetitions of a throughput point of the
// report (its Repetitions, or those of its points for a report built by
// hand).
func (r *Report) repetitions() int {
	n := r.Repetitions
	for _, m := range r.Modes {
		for _, tp := range m.Throughput {
			n = max(n, tp.Spread.Repetitions)
		}
	}
	return max(n, 1)
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
var skelTraffics = []skelTraffic{skelToday, skelCensus, skelMinimum}

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
