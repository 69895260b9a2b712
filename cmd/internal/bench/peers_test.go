package bench

import (
	"math"
	"regexp"
	"strings"
	"testing"
	"time"
)

func TestScalingRatios(t *testing.T) {
	points := []ScalingPoint{{Processes: 1, RunsPerS: 5}, {Processes: 2, RunsPerS: 9.5}, {Processes: 4, RunsPerS: 18}}
	scalingRatios(points)
	for i, want := range []float64{1, 1.9, 3.6} {
		if math.Abs(points[i].Ratio-want) > 1e-9 {
			t.Errorf("%d processes: ratio %v, want %v", points[i].Processes, points[i].Ratio, want)
		}
	}
	sr := ScalingReport{Points: points}
	if got := sr.summary(); got != "executor_scaling_4p=3.6x" {
		t.Errorf("summary %q", got)
	}
	if got := (ScalingReport{Reason: "no executor"}).summary(); got != `executor_scaling="unavailable: no executor"` {
		t.Errorf("summary without points %q", got)
	}
	none := []ScalingPoint{{Processes: 2, RunsPerS: 3}}
	scalingRatios(none)
	if none[0].Ratio != 0 {
		t.Errorf("ratio without a one-process point: %v", none[0].Ratio)
	}
}

func TestUnavailable(t *testing.T) {
	for _, c := range []struct{ key, reason, prefix, want string }{
		{"vs_langgraph", "", "langgraph-unavailable:", "vs_langgraph=unavailable"},
		{"vs_langgraph", "skipped (--skip-peer)", "langgraph-unavailable:", `vs_langgraph="unavailable: skipped (--skip-peer)"`},
		{"vs_restate", `restate-unavailable: npm said "no"`, "restate-unavailable:", `vs_restate="unavailable: npm said \"no\""`},
	} {
		if got := unavailable(c.key, c.reason, c.prefix); got != c.want {
			t.Errorf("unavailable(%q, %q) = %s, want %s", c.key, c.reason, got, c.want)
		}
	}
}

func TestStatCPU(t *testing.T) {
	// pid (comm with spaces) state ppid ... utime=250 stime=50 (fields 14, 15)
	stat := "4242 (exe (x) y) S 1 4242 4242 0 -1 4194560 1000 0 0 0 250 50 0 0 20 0 12 0 100 0 0"
	if got := statCPU(stat); got != 3*time.Second {
		t.Errorf("statCPU = %v, want 3s", got)
	}
	for _, bad := range []string{"", "4242 (exe", "4242 (exe) S 1 2"} {
		if got := statCPU(bad); got != 0 {
			t.Errorf("statCPU(%q) = %v, want 0", bad, got)
		}
	}
}

func TestParseReady(t *testing.T) {
	bin, ver, err := parseReady("npm noise\nrestate-ready: /x/bin/restate-server 1.7.12\n")
	if err != nil || bin != "/x/bin/restate-server" || ver != "1.7.12" {
		t.Errorf("parseReady = %q, %q, %v", bin, ver, err)
	}
	for _, bad := range []string{"", "restate-ready: /x/bin/restate-server", "ready /x 1.7.12"} {
		if _, _, err := parseReady(bad); err == nil {
			t.Errorf("parseReady(%q) accepted", bad)
		}
	}
}

func TestCompareRestate(t *testing.T) {
	modes := []ModeReport{
		{Mode: "default", Throughput: []Throughput{
			{Executors: 1, Concurrency: 1, RunsPerS: 40, Latency: Dist{P50: 25}},
			{Executors: 1, Concurrency: 64, RunsPerS: 110, Latency: Dist{P50: 500}},
			{Executors: 2, Concurrency: 64, RunsPerS: 120, Latency: Dist{P50: 450}},
		}},
		{Mode: "sync_always", Throughput: []Throughput{{Executors: 1, Concurrency: 64, RunsPerS: 40, Latency: Dist{P50: 1500}}}},
	}
	rr := RestateReport{Available: true, Results: []RestateResult{
		{Concurrency: 1, RunsPerS: 20, Latency: Dist{P50: 50}},
		{Concurrency: 64, RunsPerS: 55, Latency: Dist{P50: 1000}},
	}}
	got := compareRestate(modes, rr)
	want := []RestateComparison{
		{Mode: "default", Concurrency: 1, RunsPerS: 2, P50: 0.5},
		{Mode: "default", Concurrency: 64, RunsPerS: 2, P50: 0.5},
		{Mode: "sync_always", Concurrency: 64, RunsPerS: 40.0 / 55, P50: 1.5},
	}
	if len(got) != len(want) {
		t.Fatalf("got %+v", got)
	}
	for i := range want {
		g, w := got[i], want[i]
		if g.Mode != w.Mode || g.Concurrency != w.Concurrency || math.Abs(g.RunsPerS-w.RunsPerS) > 1e-9 || math.Abs(g.P50-w.P50) > 1e-9 {
			t.Errorf("comparison %d = %+v, want %+v", i, g, w)
		}
	}
	if s := restateSummary(rr, got); s != "vs_restate_c1=2.00x vs_restate_c64=2.00x vs_restate_p50_c1=0.50x vs_restate_sync_always_c64=0.73x vs_restate_equal_durability_c64=0.73x" {
		t.Errorf("summary %q", s)
	}
	if s := restateSummary(RestateReport{Reason: "restate-unavailable: no npm"}, nil); s != `vs_restate="unavailable: no npm"` {
		t.Errorf("summary when unavailable %q", s)
	}
}

func TestSentKind(t *testing.T) {
	for _, c := range []struct{ subject, reply, want string }{
		{"agent.step.requested.acme", "_INBOX.x", "publish.AGENT"},
		{"agent.step.requested.acme", "$JS.ACK.AGENT.executor.1.2.3.4.0", ""}, // a consumer's delivery
		{"agent.trail.recorded.acme", "_INBOX.y", "publish.AGENT"},
		{"$KV.budgets.acme_run", "_INBOX.z", "kv.write.budgets"},
		{"$JS.API.DIRECT.GET.KV_toolcalls.$KV.toolcalls.k", "_INBOX.z", "kv.read.toolcalls"},
		{"$JS.ACK.AGENT.projector.1.19.19.17.0", "", "ack.AGENT"},
		{"$JS.API.CONSUMER.MSG.NEXT.AGENT.router", "_INBOX.p", "pull.AGENT"},
		{"_INBOX.abc.def", "", ""},
	} {
		if got := sentKind(c.subject, c.reply); got != c.want {
			t.Errorf("sentKind(%q, %q) = %q, want %q", c.subject, c.reply, got, c.want)
		}
	}
}

// TestCompareBothDeployments: the LangGraph ratios are taken for the
// processes' wiring (TCP) and for the all-in-one's (in memory), each at
// the concurrencies it was measured at, and all of them are in the
// summary line and the printed table.
func TestCompareBothDeployments(t *testing.T) {
	r := Report{
		Modes: []ModeReport{{Mode: "default",
			Throughput: []Throughput{
				{Executors: 1, Concurrency: 1, RunsPerS: 50, Latency: Dist{P50: 20}},
				{Executors: 1, Concurrency: 64, RunsPerS: 150, Latency: Dist{P50: 400}},
				{Executors: 2, Concurrency: 64, RunsPerS: 170, Latency: Dist{P50: 380}},
			},
			AllInOne: []Throughput{{Executors: 1, Concurrency: 64, RunsPerS: 200, Latency: Dist{P50: 300}}},
			FloorTCP: Dist{P50: 0.05},
			Skeleton: []SkeletonPoint{
				{Traffic: "census", Connections: "tcp", Throughput: Throughput{Concurrency: 1, RunsPerS: 100, Latency: Dist{P50: 9}}},
				{Traffic: "census", Connections: "in_memory", Throughput: Throughput{Concurrency: 64, RunsPerS: 400, Latency: Dist{P50: 150}}},
				{Traffic: "minimum", Connections: "tcp", Throughput: Throughput{Concurrency: 64, RunsPerS: 600, Latency: Dist{P50: 100}}},
			},
		}},
		Peer: PeerReport{Available: true, Results: []PeerResult{
			{Checkpointer: "memory", Concurrency: 1, RunsPerS: 250, P50: 4},
			{Checkpointer: "memory", Concurrency: 64, RunsPerS: 400, P50: 150},
		}},
	}
	r.compare()
	want := []Comparison{
		{Deployment: "tcp", Checkpointer: "memory", Concurrency: 1, RunsPerS: 0.2, P50Speedup: 0.2},
		{Deployment: "tcp", Checkpointer: "memory", Concurrency: 64, RunsPerS: 0.375, P50Speedup: 0.375},
		{Deployment: "all_in_one", Checkpointer: "memory", Concurrency: 64, RunsPerS: 0.5, P50Speedup: 0.5},
		{Deployment: "skeleton_census_tcp", Checkpointer: "memory", Concurrency: 1, RunsPerS: 0.4, P50Speedup: 4.0 / 9},
		{Deployment: "skeleton_minimum_tcp", Checkpointer: "memory", Concurrency: 64, RunsPerS: 1.5, P50Speedup: 1.5},
	}
	if len(r.Comparisons) != len(want) {
		t.Fatalf("comparisons %+v", r.Comparisons)
	}
	for i, w := range want {
		g := r.Comparisons[i]
		if g.Deployment != w.Deployment || g.Checkpointer != w.Checkpointer || g.Concurrency != w.Concurrency ||
			math.Abs(g.RunsPerS-w.RunsPerS) > 1e-9 || math.Abs(g.P50Speedup-w.P50Speedup) > 1e-9 {
			t.Errorf("comparison %d = %+v, want %+v", i, g, w)
		}
	}
	for _, field := range []string{"runs_per_s_c64=150.0", "vs_langgraph_memory_c1=0.20x", "vs_langgraph_memory_c64=0.38x",
		"all_in_one_vs_langgraph_memory_c64=0.50x", "skeleton_census_vs_langgraph_memory_c1=0.40x",
		"skeleton_minimum_vs_langgraph_memory_c64=1.50x", "skeleton_census_overhead_ratio_p50=10.00"} {
		if !strings.Contains(r.Summary, field) {
			t.Errorf("summary %q lacks %s", r.Summary, field)
		}
	}
	if strings.Contains(r.Summary, "all_in_one_vs_langgraph_memory_c1=") || strings.Contains(r.Summary, "skeleton_minimum_overhead") {
		t.Errorf("summary %q has a ratio that was not measured", r.Summary)
	}
	var out strings.Builder
	r.Print(&out)
	if !strings.Contains(out.String(), "all-in-one, in memory") ||
		!regexp.MustCompile(`memory\s+1\s+250\.0\s+4\.0\s+0\.20x\s+0\.20x\s+-\s+-\s+-\s+0\.40x\s+-\n`).MatchString(out.String()) ||
		!regexp.MustCompile(`memory\s+64\s+400\.0\s+150\.0\s+0\.38x\s+0\.38x\s+0\.50x\s+0\.50x\s+-\s+-\s+1\.50x\n`).MatchString(out.String()) ||
		// agentbus beside each skeleton point of the same connections
		!regexp.MustCompile(`census\s+tcp\s+1\s+0\s+100\.0\s+9\.0\s+0\.00\s+0\.50x\n`).MatchString(out.String()) ||
		!regexp.MustCompile(`census\s+in_memory\s+64\s+0\s+400\.0\s+150\.0\s+0\.00\s+0\.50x\n`).MatchString(out.String()) ||
		!strings.Contains(out.String(), "skeleton census hop (sequential run p50 / 18 hops, TCP) over the floor: 10.00") {
		t.Errorf("printed report:\n%s", out.String())
	}
}
