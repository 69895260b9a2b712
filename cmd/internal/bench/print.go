package bench

import (
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"text/tabwriter"
)

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
	fmt.Fprintf(w, "skeleton runs (a run's traffic, handlers doing nothing else; today: as agentbus sends it now, census: as it sent it before issue 34, minimum: less than the design then allowed):\n")
	ours := map[string]map[int]Throughput{deploymentTCP: oneExecutor(m.Throughput), connectionsInMemory: oneExecutor(m.AllInOne)}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "traffic\tconnections\tconcurrency\truns\truns/s\trun p50 ms\tCPU ms/run\tagentbus/skeleton runs/s")
	for _, p := range m.Skeleton {
		a := ours[p.Connections][p.Concurrency]
		fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%s\t%s\t%s\t%s\n", p.Traffic, p.Connections, p.Concurrency, p.Runs, p.runsPerS(), p.p50(),
			figure("%.2f", p.CPUPerRunMS, p.Spread.CPUPerRunMS, p.Spread.Repetitions),
			timesRange(ratio(a.RunsPerS, p.RunsPerS), pairedRatios(a.Reps, p.Reps)))
	}
	tw.Flush()
	for _, traffic := range skelTraffics {
		if o := m.skeletonHopOverhead(traffic.name); o > 0 {
			fmt.Fprintf(w, "skeleton %s hop (sequential run p50 / %d hops, TCP) over the floor: %.2f\n", traffic.name, skelHops, o)
		}
	}
}

// runsPerS, p50 and cpu print a point's figures with their spread.
func (tp Throughput) runsPerS() string {
	return figure("%.1f", tp.RunsPerS, tp.Spread.RunsPerS, tp.Spread.Repetitions)
}

func (tp Throughput) p50() string {
	return figure("%.1f", tp.Latency.P50, tp.Spread.P50, tp.Spread.Repetitions)
}

func (tp Throughput) cpu() string {
	return figure("%.1f", tp.CPUPerRunMS, tp.Spread.CPUPerRunMS, tp.Spread.Repetitions)
}

// printThroughput writes the mode's throughput table, TCP and all-in-one.
func (m ModeReport) printThroughput(w io.Writer) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "executors\tconcurrency\truns\truns/s\thops/s\trun p50 ms\trun p99 ms\tCPU ms/run\tprojector lag ms\tconnections")
	for _, set := range []struct {
		connections string
		tps         []Throughput
	}{{"TCP", m.Throughput}, {"all-in-one, in memory", m.AllInOne}} {
		for _, tp := range set.tps {
			fmt.Fprintf(tw, "%d\t%d\t%d\t%s\t%.0f\t%s\t%.1f\t%s\t%.0f\t%s\n", tp.Executors, tp.Concurrency, tp.Runs, tp.runsPerS(), tp.HopsPerS,
				tp.p50(), tp.Latency.P99, tp.cpu(), tp.ProjectorLagMS, set.connections)
		}
	}
	tw.Flush()
}

// printMode writes a durability mode's tables and lines.
func (m ModeReport) printMode(w io.Writer) {
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
	m.printThroughput(w)
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

// printLangGraph writes the LangGraph table.
func (r *Report) printLangGraph(w io.Writer) {
	fmt.Fprintln(w, "\n== LangGraph peer, same 5-step plan, fake LLM with no latency ==")
	if !r.Peer.Available {
		fmt.Fprintf(w, "not measured: %s\n", r.Peer.Reason)
		return
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	head := "checkpointer\tconcurrency\truns/s\trun p50 ms\tagentbus/LangGraph runs/s\tLangGraph/agentbus p50\tall-in-one/LangGraph runs/s\tLangGraph/all-in-one p50"
	for _, traffic := range skelTraffics {
		head += "\tskeleton " + traffic.name + "/LangGraph runs/s"
	}
	fmt.Fprintln(tw, head)
	for _, pr := range r.Peer.Results {
		tcp, aio := r.comparison(deploymentTCP, pr), r.comparison(deploymentAllInOne, pr)
		fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%s\t%s\t%s\t%s", pr.Checkpointer, pr.Concurrency,
			figure("%.1f", pr.RunsPerS, pr.Spread.RunsPerS, pr.Spread.Repetitions), figure("%.1f", pr.P50, pr.Spread.P50, pr.Spread.Repetitions),
			timesRange(tcp.RunsPerS, tcp.RunsPerSRange), times(tcp.P50Speedup), timesRange(aio.RunsPerS, aio.RunsPerSRange), times(aio.P50Speedup))
		for _, traffic := range skelTraffics {
			c := r.comparison(SkeletonPoint{Traffic: traffic.name, Connections: deploymentTCP}.deployment(), pr)
			fmt.Fprintf(tw, "\t%s", timesRange(c.RunsPerS, c.RunsPerSRange))
		}
		fmt.Fprintln(tw)
	}
	tw.Flush()
	if wl := r.Peer.WithLatency; wl != nil {
		fmt.Fprintf(w, "LangGraph sqlite with %d ms model latency: run p50 %.0f ms (%d model calls/run)\n", wl.LatencyMS, wl.P50, wl.ModelCalls)
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
	fmt.Fprintln(tw, "concurrency\truns\truns/s\trun p50 ms\trun p99 ms")
	for _, res := range r.Restate.Results {
		n := res.Spread.Repetitions
		fmt.Fprintf(tw, "%d\t%d\t%s\t%s\t%s\n", res.Concurrency, res.Runs, figure("%.1f", res.RunsPerS, res.Spread.RunsPerS, n),
			figure("%.1f", res.Latency.P50, res.Spread.P50, n), figure("%.1f", res.Latency.P99, res.Spread.P99, n))
	}
	tw.Flush()
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "agentbus mode\tconcurrency\tagentbus/Restate runs/s\tagentbus/Restate p50")
	for _, c := range r.VsRestate {
		fmt.Fprintf(tw, "%s\t%d\t%s\t%.2fx\n", c.Mode, c.Concurrency, timesRange(c.RunsPerS, c.RunsPerSRange), c.P50)
	}
	tw.Flush()
}

// printMethod says what the throughput figures and the ratios are.
func (r *Report) printMethod(w io.Writer) {
	n := r.repetitions()
	if n == 1 {
		fmt.Fprintln(w, "\nthroughput points: one repetition each; ratios: agentbus's runs/s over the peer's")
		return
	}
	fmt.Fprintf(w, "\nthroughput points: the median of %d repetitions, interleaved (at each concurrency, repetition 1 of every contender, then 2, ...),\n"+
		"with their lowest and highest in brackets; ratios: agentbus's median runs/s over the peer's median runs/s, with the lowest and\n"+
		"highest ratio of a repetition to the peer's repetition measured next to it in brackets\n", n)
}

// Print writes the human-readable tables, ending with the summary line.
func (r *Report) Print(w io.Writer) {
	fmt.Fprintf(w, "\nagentbus bench — %s, %d cores, %s\n", r.Machine.CPU, r.Machine.Cores, r.Machine.Go)
	for _, m := range r.Modes {
		m.printMode(w)
	}
	r.Scaling.print(w)
	if r.Sandbox.Reason != "" {
		fmt.Fprintf(w, "\nsandbox: not measured: %s\n", r.Sandbox.Reason)
	} else {
		fmt.Fprintf(w, "\nsandbox start-to-result p50 (%s, %d runs): exec_python %.1f ms, exec_jq %.1f ms\n",
			r.Sandbox.Isolation, r.Sandbox.Runs, r.Sandbox.PythonP50, r.Sandbox.JQP50)
	}
	r.printLangGraph(w)
	r.printRestate(w)
	r.printMethod(w)
	if r.written != "" {
		fmt.Fprintf(w, "\nwritten: %s, %s\n", filepath.Join(r.written, "bench.json"), filepath.Join(r.written, "latency.svg"))
	}
	if r.DurationS > 0 {
		fmt.Fprintf(w, "took %s (expected %s)\n", minutes(seconds(r.DurationS)), minutes(seconds(r.EstimatedS)))
	}
	fmt.Fprintf(w, "\n%s\n", r.Summary)
}
