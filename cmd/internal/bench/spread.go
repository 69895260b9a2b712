package bench

import (
	"fmt"
	"slices"
)

// Rep is one repetition of a throughput point: what a closed loop
// measured, for agentbus, a skeleton or a peer alike.
type Rep struct {
	Runs     int     `json:"runs"`
	Seconds  float64 `json:"seconds"` // the measured phase's wall time
	RunsPerS float64 `json:"runs_per_s"`
	P50      float64 `json:"p50_ms"`
	P99      float64 `json:"p99_ms"`
	Mean     float64 `json:"mean_ms"`
	// CPUPerRunMS and ProjectorLagMS are agentbus's and the skeleton's
	// only (see Throughput).
	CPUPerRunMS    float64 `json:"cpu_per_run_ms,omitempty"`
	ProjectorLagMS float64 `json:"projector_lag_ms,omitempty"`
}

// Range is the lowest and the highest value of a figure over the
// repetitions of a point.
type Range struct {
	Min float64 `json:"min"`
	Max float64 `json:"max"`
}

// Spread is how far apart the repetitions of a throughput point lie. The
// point's own figures are the medians of its repetitions; Spread holds
// their lowest and highest values beside them.
type Spread struct {
	Repetitions int   `json:"repetitions"`
	RunsPerS    Range `json:"runs_per_s"`
	P50         Range `json:"p50_ms"`
	P99         Range `json:"p99_ms"`
	CPUPerRunMS Range `json:"cpu_per_run_ms"`
}

// median is the median of the values (the mean of the middle two of an
// even count), 0 for none.
func median(values []float64) float64 {
	if len(values) == 0 {
		return 0
	}
	s := slices.Clone(values)
	slices.Sort(s)
	if n := len(s); n%2 == 0 {
		return (s[n/2-1] + s[n/2]) / 2
	}
	return s[len(s)/2]
}

// figures is one figure of every repetition.
func figures(reps []Rep, f func(Rep) float64) []float64 {
	out := make([]float64, len(reps))
	for i, r := range reps {
		out[i] = f(r)
	}
	return out
}

// rangeOf is the lowest and highest of values.
func rangeOf(values []float64) Range {
	if len(values) == 0 {
		return Range{}
	}
	return Range{Min: slices.Min(values), Max: slices.Max(values)}
}

// medianRep is the repetition whose every figure is the median of that
// figure over reps (each figure on its own: the median runs/s and the
// median p50 may come from different repetitions).
func medianRep(reps []Rep) Rep {
	m := func(f func(Rep) float64) float64 { return median(figures(reps, f)) }
	return Rep{
		Runs:           int(m(func(r Rep) float64 { return float64(r.Runs) })),
		Seconds:        m(func(r Rep) float64 { return r.Seconds }),
		RunsPerS:       m(func(r Rep) float64 { return r.RunsPerS }),
		P50:            m(func(r Rep) float64 { return r.P50 }),
		P99:            m(func(r Rep) float64 { return r.P99 }),
		Mean:           m(func(r Rep) float64 { return r.Mean }),
		CPUPerRunMS:    m(func(r Rep) float64 { return r.CPUPerRunMS }),
		ProjectorLagMS: m(func(r Rep) float64 { return r.ProjectorLagMS }),
	}
}

// spreadOf is the lowest and highest figures of reps.
func spreadOf(reps []Rep) Spread {
	r := func(f func(Rep) float64) Range { return rangeOf(figures(reps, f)) }
	return Spread{Repetitions: len(reps),
		RunsPerS:    r(func(r Rep) float64 { return r.RunsPerS }),
		P50:         r(func(r Rep) float64 { return r.P50 }),
		P99:         r(func(r Rep) float64 { return r.P99 }),
		CPUPerRunMS: r(func(r Rep) float64 { return r.CPUPerRunMS })}
}

// pairedRatios is the runs/s ratio of each repetition of a to the same
// repetition of b, measured next to it (see interleave): their lowest and
// highest, or a zero Range unless both have the same two or more
// repetitions.
func pairedRatios(a, b []Rep) Range {
	if len(a) < 2 || len(a) != len(b) {
		return Range{}
	}
	ratios := make([]float64, len(a))
	for i := range a {
		ratios[i] = ratio(a[i].RunsPerS, b[i].RunsPerS)
	}
	return rangeOf(ratios)
}

// rep is one measurement of tp as a repetition.
func (tp Throughput) rep() Rep {
	return Rep{Runs: tp.Runs, Seconds: ratio(float64(tp.Runs), tp.RunsPerS), RunsPerS: tp.RunsPerS, P50: tp.Latency.P50,
		P99: tp.Latency.P99, Mean: tp.Latency.Mean, CPUPerRunMS: tp.CPUPerRunMS, ProjectorLagMS: tp.ProjectorLagMS}
}

// withReps is tp with the medians of reps for figures, their spread and
// the repetitions themselves.
func (tp Throughput) withReps(reps []Rep, hopsPerRun float64) Throughput {
	m := medianRep(reps)
	tp.Runs, tp.RunsPerS, tp.HopsPerS = m.Runs, m.RunsPerS, m.RunsPerS*hopsPerRun
	tp.Latency = Dist{N: m.Runs, P50: m.P50, P99: m.P99, Mean: m.Mean}
	tp.CPUPerRunMS, tp.ProjectorLagMS = m.CPUPerRunMS, m.ProjectorLagMS
	tp.Spread, tp.Reps = spreadOf(reps), reps
	return tp
}

// rep is one LangGraph measurement as a repetition.
func (pr PeerResult) rep() Rep {
	return Rep{Runs: pr.Runs, Seconds: pr.WallS, RunsPerS: pr.RunsPerS, P50: pr.P50, P99: pr.P99, Mean: pr.Mean}
}

// withReps is pr with the medians of reps for figures, their spread and
// the repetitions themselves.
func (pr PeerResult) withReps(reps []Rep) PeerResult {
	m := medianRep(reps)
	pr.Runs, pr.WallS, pr.RunsPerS, pr.P50, pr.P99, pr.Mean = m.Runs, m.Seconds, m.RunsPerS, m.P50, m.P99, m.Mean
	pr.Spread, pr.Reps = spreadOf(reps), reps
	return pr
}

// rep is one Restate measurement as a repetition.
func (rr RestateResult) rep() Rep {
	return Rep{Runs: rr.Runs, Seconds: ratio(float64(rr.Runs), rr.RunsPerS), RunsPerS: rr.RunsPerS, P50: rr.Latency.P50,
		P99: rr.Latency.P99, Mean: rr.Latency.Mean}
}

// withReps is rr with the medians of reps for figures, their spread and
// the repetitions themselves.
func (rr RestateResult) withReps(reps []Rep) RestateResult {
	m := medianRep(reps)
	rr.Runs, rr.RunsPerS = m.Runs, m.RunsPerS
	rr.Latency = Dist{N: m.Runs, P50: m.P50, P99: m.P99, Mean: m.Mean}
	rr.Spread, rr.Reps = spreadOf(reps), reps
	return rr
}

// figure prints a median with the lowest and highest of its repetitions
// beside it when there are several: "115.0 (112.1–120.3)".
func figure(format string, median float64, r Range, reps int) string {
	s := fmt.Sprintf(format, median)
	if reps > 1 {
		s += fmt.Sprintf(" ("+format+"–"+format+")", r.Min, r.Max)
	}
	return s
}

// timesRange prints a ratio with the range of its repetitions' paired
// ratios beside it, when there is one; "-" for a ratio not measured.
func timesRange(x float64, r Range) string {
	if x == 0 {
		return "-"
	}
	if r == (Range{}) {
		return fmt.Sprintf("%.2fx", x)
	}
	return fmt.Sprintf("%.2fx (%.2f–%.2f)", x, r.Min, r.Max)
}
