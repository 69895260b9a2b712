package bench

import (
	"math"
	"strings"
	"testing"
)

func TestMedian(t *testing.T) {
	for _, c := range []struct {
		in   []float64
		want float64
	}{{nil, 0}, {[]float64{3}, 3}, {[]float64{9, 1, 5}, 5}, {[]float64{4, 1, 3, 2}, 2.5}} {
		if got := median(c.in); got != c.want {
			t.Errorf("median(%v) = %v, want %v", c.in, got, c.want)
		}
	}
}

// TestWithReps: a point's figures are the medians of its repetitions,
// figure by figure, with their lowest and highest beside them.
func TestWithReps(t *testing.T) {
	reps := []Rep{
		{Runs: 300, Seconds: 10, RunsPerS: 30, P50: 40, P99: 90, CPUPerRunMS: 20, ProjectorLagMS: 5},
		{Runs: 500, Seconds: 10, RunsPerS: 50, P50: 20, P99: 70, CPUPerRunMS: 16, ProjectorLagMS: 9},
		{Runs: 400, Seconds: 12, RunsPerS: 33, P50: 30, P99: 95, CPUPerRunMS: 18, ProjectorLagMS: 7},
	}
	tp := Throughput{Executors: 1, Concurrency: 8}.withReps(reps, 18)
	if tp.Runs != 400 || tp.RunsPerS != 33 || tp.HopsPerS != 33*18 || tp.Latency.P50 != 30 || tp.Latency.P99 != 90 ||
		tp.CPUPerRunMS != 18 || tp.ProjectorLagMS != 7 || tp.Executors != 1 || tp.Concurrency != 8 || len(tp.Reps) != 3 {
		t.Errorf("medians: %+v", tp)
	}
	want := Spread{Repetitions: 3, RunsPerS: Range{30, 50}, P50: Range{20, 40}, P99: Range{70, 95}, CPUPerRunMS: Range{16, 20}}
	if tp.Spread != want {
		t.Errorf("spread %+v, want %+v", tp.Spread, want)
	}
	pr := PeerResult{Checkpointer: "sqlite", Version: "1.2"}.withReps(reps)
	if pr.RunsPerS != 33 || pr.P50 != 30 || pr.WallS != 10 || pr.Version != "1.2" || pr.Spread.RunsPerS != (Range{30, 50}) {
		t.Errorf("peer result %+v", pr)
	}
	rr := RestateResult{Concurrency: 8}.withReps(reps)
	if rr.RunsPerS != 33 || rr.Latency.P50 != 30 || rr.Spread.P99 != (Range{70, 95}) {
		t.Errorf("restate result %+v", rr)
	}
	// One measurement, as a repetition, and back.
	one := Throughput{Runs: 600, RunsPerS: 60, Latency: Dist{P50: 12, P99: 30, Mean: 14}, CPUPerRunMS: 9}
	if r := one.rep(); r.Seconds != 10 || r.P50 != 12 || r.CPUPerRunMS != 9 {
		t.Errorf("rep %+v", r)
	}
}

func TestPairedRatios(t *testing.T) {
	a := []Rep{{RunsPerS: 40}, {RunsPerS: 60}, {RunsPerS: 50}}
	b := []Rep{{RunsPerS: 100}, {RunsPerS: 100}, {RunsPerS: 80}}
	if got := pairedRatios(a, b); math.Abs(got.Min-0.4) > 1e-9 || math.Abs(got.Max-0.625) > 1e-9 {
		t.Errorf("paired ratios %+v", got)
	}
	if got := pairedRatios(a[:1], b[:1]); got != (Range{}) {
		t.Errorf("one repetition: %+v", got)
	}
	if got := pairedRatios(a, b[:2]); got != (Range{}) {
		t.Errorf("repetitions that do not pair: %+v", got)
	}
}

func TestFigure(t *testing.T) {
	if got := figure("%.1f", 115, Range{112.06, 120.3}, 3); got != "115.0 (112.1–120.3)" {
		t.Errorf("figure %q", got)
	}
	if got := figure("%.1f", 115, Range{115, 115}, 1); got != "115.0" {
		t.Errorf("one repetition: %q", got)
	}
	if got := timesRange(0.5, Range{0.45, 0.55}); got != "0.50x (0.45–0.55)" {
		t.Errorf("timesRange %q", got)
	}
	if got := timesRange(0.5, Range{}); got != "0.50x" || timesRange(0, Range{}) != "-" {
		t.Errorf("timesRange without a range %q", got)
	}
}

// TestCompareRepeated: the ratios are of the medians, the ranges of the
// paired repetitions, and the summary line has the census and the
// repetitions.
func TestCompareRepeated(t *testing.T) {
	ours := Throughput{Executors: 1, Concurrency: 64}.withReps([]Rep{{RunsPerS: 100}, {RunsPerS: 120}, {RunsPerS: 90}}, 18)
	synced := Throughput{Executors: 1, Concurrency: 64}.withReps([]Rep{{RunsPerS: 30}, {RunsPerS: 36}, {RunsPerS: 33}}, 18)
	lg := PeerResult{Checkpointer: "memory", Concurrency: 64}.withReps([]Rep{{RunsPerS: 200}, {RunsPerS: 300}, {RunsPerS: 250}})
	rs := RestateResult{Concurrency: 64}.withReps([]Rep{{RunsPerS: 150}, {RunsPerS: 200}, {RunsPerS: 120}})
	r := Report{
		Modes: []ModeReport{
			{Mode: "default", Throughput: []Throughput{ours}, Census: Census{Runs: 40, Records: 111.84, Sent: 175.76, Bytes: 156.1 * 1024}},
			{Mode: "sync_always", Throughput: []Throughput{synced}},
		},
		Peer:    PeerReport{Available: true, Results: []PeerResult{lg}},
		Restate: RestateReport{Available: true, Results: []RestateResult{rs}},
	}
	r.compare()
	c := r.Comparisons[0]
	if c.RunsPerS != 100.0/250 || math.Abs(c.RunsPerSRange.Min-0.36) > 1e-9 || math.Abs(c.RunsPerSRange.Max-0.5) > 1e-9 {
		t.Errorf("LangGraph comparison %+v", c)
	}
	for _, field := range []string{"vs_langgraph_memory_c64=0.40x", "vs_restate_c64=0.67x", "vs_restate_sync_always_c64=0.22x",
		"vs_restate_equal_durability_c64=0.22x", "durable_writes_per_run=111.8", "client_messages_per_run=175.8", "client_kib_per_run=156.1", "repetitions=3"} {
		if !strings.Contains(r.Summary, field) {
			t.Errorf("summary %q lacks %s", r.Summary, field)
		}
	}
	var out strings.Builder
	r.Print(&out)
	for _, want := range []string{"100.0 (90.0–120.0)", "0.40x (0.36–0.50)", "250.0 (200.0–300.0)", "the median of 3 repetitions, interleaved"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("printed report lacks %q:\n%s", want, out.String())
		}
	}
}
