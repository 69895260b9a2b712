package bench

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/agentbus/agentbus/cmd/internal/app"
	"github.com/agentbus/agentbus/cmd/internal/bench/host"
	"github.com/agentbus/agentbus/cmd/internal/bench/pipeline"
	"github.com/agentbus/agentbus/events"
	"github.com/agentbus/agentbus/handlers"
)

// floor measures the JetStream round trip agentbus cannot beat: publish
// with PubAck, receive from a pull consumer, ack. One at a time.
func floor(ctx context.Context, srv *benchServer, tcp bool, n int) (Dist, error) {
	nc, js, err := srv.connect(tcp)
	if err != nil {
		return Dist{}, err
	}
	defer nc.Close()
	name := fmt.Sprintf("FLOOR_%v", tcp)
	if _, err := js.CreateOrUpdateStream(ctx, jetstream.StreamConfig{Name: name, Subjects: []string{"floor." + name},
		Storage: jetstream.FileStorage, Duplicates: 15 * time.Minute}); err != nil {
		return Dist{}, err
	}
	cons, err := js.CreateOrUpdateConsumer(ctx, name, jetstream.ConsumerConfig{Durable: "floor", AckPolicy: jetstream.AckExplicitPolicy})
	if err != nil {
		return Dist{}, err
	}
	it, err := cons.Messages(jetstream.PullMaxMessages(16))
	if err != nil {
		return Dist{}, err
	}
	defer it.Stop()
	warm := n / 10
	var lat []time.Duration
	payload := make([]byte, 512)
	for i := range n + warm {
		start := time.Now()
		if _, err := js.Publish(ctx, "floor."+name, payload, jetstream.WithMsgID(fmt.Sprint(i))); err != nil {
			return Dist{}, err
		}
		msg, err := it.Next()
		if err != nil {
			return Dist{}, err
		}
		if err := msg.Ack(); err != nil {
			return Dist{}, err
		}
		if i >= warm {
			lat = append(lat, time.Since(start))
		}
	}
	return distOf(lat), nil
}

// hopResult is the per-hop latency of sequential runs.
type hopResult struct {
	Hop        Dist            `json:"hop"`
	HopsPerRun float64         `json:"hops_per_run"`
	Run        Dist            `json:"run"`
	ByOutput   map[string]Dist `json:"by_output_type"` // hop latency by the type the hop emitted
}

// perHop runs n sequential pipeline runs and measures every hop: the time
// between an input's and its output's stored timestamps, which covers the
// consume, the handler (model, skill, store and KV work) and the publish.
func perHop(ctx context.Context, srv *benchServer, tcp bool, n int) (hopResult, error) {
	d, err := deploy(ctx, srv, deployConfig{tcp: tcp, executors: 1, model: newPipelineModel()})
	if err != nil {
		return hopResult{}, err
	}
	defer d.close()
	warm := max(n/10, 2)
	ids := map[string]bool{}
	var runLat []time.Duration
	for i := range n + warm {
		res, took, err := d.run(ctx, pipeline.Task)
		if err != nil {
			return hopResult{}, err
		}
		if i >= warm {
			ids[res.RunID] = true
			runLat = append(runLat, took)
		}
	}
	runs, err := storedRuns(ctx, d.js)
	if err != nil {
		return hopResult{}, err
	}
	var hops []time.Duration
	byType := map[string][]time.Duration{}
	for id, st := range runs {
		if !ids[id] {
			continue
		}
		for i := 1; i < len(st); i++ {
			d := st[i].ts.Sub(st[i-1].ts)
			hops = append(hops, d)
			byType[st[i].typ] = append(byType[st[i].typ], d)
		}
	}
	by := map[string]Dist{}
	for typ, ds := range byType {
		by[strings.TrimPrefix(typ, "io.agentbus.")] = distOf(ds)
	}
	return hopResult{Hop: distOf(hops), HopsPerRun: float64(len(hops)) / float64(max(len(ids), 1)), Run: distOf(runLat), ByOutput: by}, nil
}

// Throughput is one closed-loop load point.
type Throughput struct {
	Executors   int     `json:"executors"`
	Concurrency int     `json:"concurrency"`
	Runs        int     `json:"runs"`
	RunsPerS    float64 `json:"runs_per_s"`
	HopsPerS    float64 `json:"hops_per_s"`
	Latency     Dist    `json:"run_latency"`
	// CPUPerRunMS is the process's CPU time (user and system: every role,
	// the embedded nats-server and the client) over the measured phase,
	// per run. Steadier than runs/s on a shared machine.
	CPUPerRunMS float64 `json:"cpu_per_run_ms"`
	// ProjectorLagMS is how long the projector took, after the last run
	// finished, to store the last of the runs' trails (included in
	// RunsPerS and CPUPerRunMS).
	ProjectorLagMS float64 `json:"projector_lag_ms"`
	// Spread is the lowest and highest figures of the point's
	// repetitions (Reps, in the order measured), whose medians the
	// figures above are.
	Spread Spread `json:"spread"`
	Reps   []Rep  `json:"repetitions,omitempty"`
}

// throughput measures one repetition of a load point: after warm runs
// at concurrency conc, it keeps conc runs in flight for l, with every
// role connected over TCP, or in memory (inProc: as the all-in-one
// connects to its embedded server).
func throughput(ctx context.Context, srv *benchServer, executors, conc int, l load, warm int, hopsPerRun float64, inProc bool) (Throughput, error) {
	d, err := deploy(ctx, srv, deployConfig{tcp: !inProc, executors: executors, model: newPipelineModel()})
	if err != nil {
		return Throughput{}, err
	}
	defer d.close()
	if _, _, err := closedLoop(ctx, d, conc, fixed(warm)); err != nil { // warm up the connections and caches
		return Throughput{}, err
	}
	if _, err := d.caughtUp(ctx); err != nil { // nothing of the warm-up left to project
		return Throughput{}, err
	}
	cpu0 := host.ProcessCPU()
	lat, elapsed, err := closedLoop(ctx, d, conc, l)
	if err != nil {
		return Throughput{}, err
	}
	// The runs' trails are part of their work: the point ends once the
	// projector has stored them all, so what it left behind neither
	// flatters this point nor weighs on the next.
	lag, err := d.caughtUp(ctx)
	if err != nil {
		return Throughput{}, err
	}
	elapsed += lag
	cpu := host.ProcessCPU() - cpu0
	total := len(lat)
	rps := float64(total) / elapsed.Seconds()
	return Throughput{Executors: executors, Concurrency: conc, Runs: total, RunsPerS: rps, HopsPerS: rps * hopsPerRun, Latency: distOf(lat),
		CPUPerRunMS: float64(cpu.Microseconds()) / 1000 / float64(total), ProjectorLagMS: float64(lag.Microseconds()) / 1000}, nil
}

// caughtUp waits until the projector has handled every audit message
// stored so far, and returns how long that took.
func (d *deployment) caughtUp(ctx context.Context) (time.Duration, error) {
	role, _ := app.RoleNamed(handlers.RoleProjector)
	c := role.Consumer()
	cons, err := d.js.Consumer(ctx, c.Stream, c.Name)
	if err != nil {
		return 0, fmt.Errorf("projector consumer: %w", err)
	}
	start := time.Now()
	for {
		info, err := cons.Info(ctx)
		if err != nil {
			return 0, fmt.Errorf("projector consumer: %w", err)
		}
		if info.NumPending == 0 && info.NumAckPending == 0 {
			return time.Since(start), nil
		}
		if time.Since(start) > time.Minute {
			return 0, fmt.Errorf("the projector has %d audit messages to handle and %d unacknowledged after a minute", info.NumPending, info.NumAckPending)
		}
		select {
		case <-ctx.Done():
			return 0, ctx.Err()
		case <-time.After(2 * time.Millisecond):
		}
	}
}

// closedLoop keeps conc runs of pipeline.Task in flight for l, and
// returns their latencies and the wall time.
func closedLoop(ctx context.Context, d *deployment, conc int, l load) ([]time.Duration, time.Duration, error) {
	return keepInFlight(conc, l, func(int) (time.Duration, error) {
		_, took, err := d.run(ctx, pipeline.Task)
		return took, err
	})
}

// LLMShare is the fraction of run time spent in the model.
type LLMShare struct {
	ModelLatencyMS int     `json:"model_latency_ms"`
	Runs           int     `json:"runs"`
	ModelCalls     int     `json:"model_calls_per_run"`
	Share          float64 `json:"llm_share"`
	OutsideMS      Dist    `json:"outside_model_ms"`
}

// llmShare runs n runs one after another with a model that sleeps latency
// per call, and compares each run's model time with its wall time.
func llmShare(ctx context.Context, srv *benchServer, latency time.Duration, n int) (LLMShare, error) {
	m := newSleepyModel(latency)
	d, err := deploy(ctx, srv, deployConfig{tcp: true, executors: 1, model: m})
	if err != nil {
		return LLMShare{}, err
	}
	defer d.close()
	type one struct {
		tag  string
		took time.Duration
		err  error
	}
	out := make(chan one, n)
	for i := range n {
		tag := fmt.Sprintf("(run %d)", i)
		_, took, err := d.run(ctx, pipeline.Task+" "+tag)
		out <- one{tag, took, err}
	}
	var model, wall time.Duration
	var outside []time.Duration
	for range n {
		o := <-out
		if o.err != nil {
			return LLMShare{}, o.err
		}
		mt := m.modelTime(o.tag)
		model += mt
		wall += o.took
		outside = append(outside, o.took-mt)
	}
	calls := int(model / time.Duration(n) / latency)
	return LLMShare{ModelLatencyMS: int(latency.Milliseconds()), Runs: n, ModelCalls: calls,
		Share: model.Seconds() / wall.Seconds(), OutsideMS: distOf(outside)}, nil
}

// RunLength compares hop latency early and late in a long loop.
type RunLength struct {
	Iterations int     `json:"iterations"`
	Window     int     `json:"window"`
	Early      Dist    `json:"hop_first_window"`
	Late       Dist    `json:"hop_last_window"`
	Ratio      float64 `json:"late_over_early_p50"`
}

// runLength runs one run whose first step loops iterations times and
// compares the executor hop latency of the first and the last fifth of
// the iterations (200 each of 1,000).
func runLength(ctx context.Context, srv *benchServer, iterations int) (RunLength, error) {
	d, err := deploy(ctx, srv, deployConfig{tcp: true, executors: 1, maxTurns: iterations + 10,
		model: &loopModel{inner: newPipelineModel(), iterations: iterations}})
	if err != nil {
		return RunLength{}, err
	}
	defer d.close()
	res, _, err := d.run(ctx, pipeline.Task)
	if err != nil {
		return RunLength{}, err
	}
	runs, err := storedRuns(ctx, d.js)
	if err != nil {
		return RunLength{}, err
	}
	var iters []time.Duration
	st := runs[res.RunID]
	for i := 1; i < len(st); i++ {
		if st[i].typ == events.TypeStepIterated {
			iters = append(iters, st[i].ts.Sub(st[i-1].ts))
		}
	}
	if len(iters) < iterations {
		return RunLength{}, fmt.Errorf("the loop made %d iterations, want %d", len(iters), iterations)
	}
	w := iterations / 5
	early, late := distOf(iters[:w]), distOf(iters[len(iters)-w:])
	return RunLength{Iterations: len(iters), Window: w, Early: early, Late: late, Ratio: ratio(late.P50, early.P50)}, nil
}
