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
		fmt.Fprintf(w, "budget per call (reserve + settle, TCP): p50 %.3f ms warm, %.3f ms cold: %.2f of a hop's p50\n",
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
