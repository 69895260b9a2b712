package chaos

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/google/uuid"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/agentbus/agentbus/cmd/internal/procs"
	"github.com/agentbus/agentbus/orch"
	"github.com/agentbus/agentbus/runclient"
)

// harness is one chaos run.
type harness struct {
	cfg   Config
	start time.Time
	d     *deployment
	nc    *nats.Conn
	js    jetstream.JetStream
	w     *watcher
	http  *http.Client
	runs  *runclient.Client // NATS submissions
	api   *runclient.HTTP   // submissions through the ingress

	reference string // the fault-free answer
	refPlan   string // the reference run's plan

	released atomic.Int64 // runs of segments up to this one may be submitted
	inflight atomic.Int64
	brokerMu sync.Mutex // held while a broker is down: one at a time
	leaders  *leaderWatch

	mu       sync.Mutex
	faults   map[string]int
	crashes  int
	problems []string
	crashLog []string // log files of crashed processes
	retries  int
	stalls   int
}

// runRec is one submitted run.
type runRec struct {
	idx     int
	viaHTTP bool
	session string
	runIDs  []string
	httpRes *orch.RunResult
	stalled time.Time // when a POST timed out without an answer
	err     error
}

// Run starts the deployment, takes a reference run, submits cfg.Runs runs
// under faults, waits for them and checks the outcome. The error reports a
// harness failure (a process that cannot start); findings are in the
// Summary, whose OK method says whether the deployment passed.
func Run(ctx context.Context, cfg Config) (sum Summary, err error) {
	cfg.defaults()
	cfg.Out = &lockedWriter{w: cfg.Out}
	h := &harness{cfg: cfg, start: time.Now(), faults: map[string]int{}, http: &http.Client{Timeout: cfg.HTTPTimeout}}
	sum.Seed, sum.Runs = cfg.Seed, cfg.Runs

	dir := cfg.WorkDir
	if dir == "" {
		if dir, err = os.MkdirTemp("", "agentbus-chaos-"); err != nil {
			return sum, err
		}
	} else if err := os.MkdirAll(dir, 0o755); err != nil {
		return sum, err
	}
	sum.WorkDir = dir
	bin := cfg.BinDir
	if bin == "" {
		bin = dir + "/bin"
		h.logf("building the agentbus binaries into %s", bin)
		if err := procs.BuildRoles(ctx, bin, true); err != nil {
			return sum, err
		}
	}
	if cfg.BrokerOutages != "" && cfg.BrokerOutages != OutagesContinuous {
		return sum, fmt.Errorf("broker outages %q: the only mode is %q", cfg.BrokerOutages, OutagesContinuous)
	}
	if cfg.Cluster == 2 || cfg.Cluster < 0 {
		return sum, fmt.Errorf("a cluster of %d nodes cannot replicate three times (use 3 or more)", cfg.Cluster)
	}
	h.logf("chaos: seed %d, %d runs, %d faults, %d in flight, %d nats-server(s), broker outages %q; logs in %s",
		cfg.Seed, cfg.Runs, cfg.Faults, cfg.Concurrency, max(cfg.Cluster, 1), cfg.BrokerOutages, dir)

	d, err := newDeployment(h, bin, dir)
	if err != nil {
		return sum, err
	}
	h.d = d
	defer func() {
		d.close()
		if err == nil && sum.OK() && cfg.WorkDir == "" {
			_ = os.RemoveAll(dir)
			sum.WorkDir = ""
		}
	}()
	if err := d.start(ctx); err != nil {
		h.printTails(nil)
		return sum, err
	}
	h.nc, err = nats.Connect(d.natsURL, nats.Name("agentbus-chaos"), nats.MaxReconnects(-1),
		nats.RetryOnFailedConnect(true), nats.ReconnectWait(100*time.Millisecond))
	if err != nil {
		return sum, err
	}
	defer h.nc.Close()
	if h.js, err = jetstream.New(h.nc); err != nil {
		return sum, err
	}
	h.w = newWatcher(h.js)
	wctx, stopWatch := context.WithCancel(ctx)
	defer stopWatch()
	go h.w.run(wctx)
	if h.runs, err = runclient.New(ctx, h.js, runclient.Config{Source: "chaos"}); err != nil {
		return sum, err
	}
	defer h.runs.Close()
	h.api = runclient.NewHTTP("http://"+d.ingress, h.http)

	if err := h.referenceRun(ctx); err != nil {
		h.printTails(nil)
		return sum, err
	}
	h.logf("reference answer (%d bytes) taken in a fault-free run", len(h.reference))
	if h.leaders, err = watchLeaders(h.nc); err != nil {
		return sum, err
	}

	recs := h.submitUnderFaults(ctx)
	settleCtx, cancel := context.WithTimeout(ctx, cfg.Settle)
	h.settle(settleCtx, recs)
	cancel()
	if err := ctx.Err(); err != nil {
		return sum, err
	}
	sum.LeaderChanges = h.leaders.count()
	h.analyse(ctx, recs, &sum)
	h.checkProjections(ctx, recs, &sum)
	sum.Duration = time.Since(h.start)
	fmt.Fprintln(cfg.Out, sum.Line())
	for _, p := range sum.Problems {
		fmt.Fprintln(cfg.Out, "  problem:", p)
	}
	if !sum.OK() {
		h.printTails(recs)
		fmt.Fprintf(cfg.Out, "process logs: %s\n", dir)
	}
	return sum, nil
}

func (h *harness) logf(format string, args ...any) {
	if h.cfg.Quiet && !strings.HasPrefix(format, "chaos:") {
		return
	}
	fmt.Fprintf(h.cfg.Out, "[%7.1fs] %s\n", time.Since(h.start).Seconds(), fmt.Sprintf(format, args...))
}

func (h *harness) problem(format string, args ...any) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.problems = append(h.problems, fmt.Sprintf(format, args...))
}

func (h *harness) crashed(name string, exit error, logPath string) {
	h.mu.Lock()
	h.crashes++
	h.crashLog = append(h.crashLog, logPath)
	h.mu.Unlock()
	h.problem("%s exited on its own (%v); restarted", name, exit)
	h.logf("%s exited on its own (%v); restarting it", name, exit)
}

// referenceRun submits one run before any fault and keeps its answer.
func (h *harness) referenceRun(ctx context.Context) error {
	deadline := time.Now().Add(60 * time.Second)
	for {
		res, err := h.api.Run(ctx, h.request("chaos-reference"))
		if err == nil {
			if res.TerminalCode != orch.CodeSuccess {
				return fmt.Errorf("the fault-free reference run ended %s: %s", res.TerminalCode, res.Response)
			}
			h.reference, h.refPlan = res.Response, res.PlanID
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the fault-free reference run failed: %w", err)
		}
		if err := sleep(ctx, 500*time.Millisecond); err != nil {
			return err
		}
	}
}

// request is the run of session, by a user of its own: no run recalls
// another's exchange, so every run's trace has the reference run's
// events. The ingress assigns the run id of an HTTP run.
func (h *harness) request(session string) orch.RunRequest {
	return orch.RunRequest{TenantID: Tenant, UserID: "chaos-" + session, SessionID: session, Message: DemoTask}
}

// submitUnderFaults submits every run, cfg.Concurrency at a time, while
// the fault injector runs. Run i belongs to segment i*Faults/Runs and is
// released when fault number segment is about to be injected, so the runs
// are spread over the faults.
func (h *harness) submitUnderFaults(ctx context.Context) []*runRec {
	cfg := h.cfg
	recs := make([]*runRec, cfg.Runs)
	queue := make(chan *runRec, cfg.Runs)
	for i := range recs {
		r := &runRec{idx: i, viaHTTP: cfg.HTTPEvery > 0 && i%cfg.HTTPEvery == 0}
		if r.viaHTTP {
			r.session = fmt.Sprintf("chaos-h-%d", i)
		} else {
			r.session = fmt.Sprintf("chaos-n-%d", i)
		}
		recs[i] = r
		queue <- r
	}
	close(queue)
	h.released.Store(-1)
	if cfg.Faults == 0 {
		h.released.Store(1 << 40)
	}
	var wg sync.WaitGroup
	var finished atomic.Int64
	for range cfg.Concurrency {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for r := range queue {
				seg := int64(r.idx * cfg.Faults / cfg.Runs)
				for h.released.Load() < seg {
					if sleep(ctx, 10*time.Millisecond) != nil {
						return
					}
				}
				h.inflight.Add(1)
				h.submit(ctx, r)
				h.inflight.Add(-1)
				if n := finished.Add(1); n%max(1, int64(cfg.Runs/10)) == 0 {
					h.logf("%d/%d runs submitted and waited for", n, cfg.Runs)
				}
			}
		}()
	}
	submitted := make(chan struct{})
	go func() { wg.Wait(); close(submitted) }()
	outages := make(chan struct{})
	go func() {
		defer close(outages)
		if cfg.BrokerOutages == OutagesContinuous {
			h.continuousOutages(ctx, submitted)
		}
	}()
	h.injectFaults(ctx)
	<-submitted
	<-outages
	return recs
}

// submit sends one run and waits (up to RunWait) for its run.finished.
func (h *harness) submit(ctx context.Context, r *runRec) {
	if r.viaHTTP {
		h.submitHTTP(ctx, r)
		return
	}
	req := h.request(r.session)
	req.RunID = uuid.NewSHA1(uuid.NameSpaceOID, fmt.Appendf(nil, "agentbus-chaos/%d/%d", h.cfg.Seed, r.idx)).String()
	r.runIDs = []string{req.RunID}
	// The id is the Nats-Msg-Id: retrying through an outage stores one run.
	for {
		pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		p, err := h.runs.Submit(pctx, req)
		cancel()
		if err == nil {
			wctx, cancel := context.WithTimeout(ctx, h.cfg.RunWait)
			_, _ = p.Wait(wctx)
			cancel()
			p.Close()
			return
		}
		if sleep(ctx, 200*time.Millisecond) != nil {
			r.err = err
			return
		}
	}
}

// submitHTTP posts the run to the ingress. A POST that fails without an
// answer (the ingress was killed, NATS was down, the answer never came)
// is ambiguous: the harness waits for the ingress to be back, reads the
// stream, and adopts the run requested with the run's session id if there
// is one; otherwise it posts again.
func (h *harness) submitHTTP(ctx context.Context, r *runRec) {
	for attempt := 0; ; attempt++ {
		if attempt > 0 {
			h.mu.Lock()
			h.retries++
			h.mu.Unlock()
		}
		res, err := h.api.Run(ctx, h.request(r.session))
		var refused *runclient.StatusError
		switch {
		case err == nil:
			r.httpRes = &res
			r.runIDs = []string{res.RunID}
			return
		case errors.As(err, &refused) && refused.StatusCode >= 400 && refused.StatusCode < 500:
			r.err = fmt.Errorf("POST /agent/run: status %d", refused.StatusCode)
			return
		case errors.Is(err, context.DeadlineExceeded) || isTimeout(err):
			h.mu.Lock()
			h.stalls++
			h.mu.Unlock()
			r.stalled = time.Now()
		}
		if ctx.Err() != nil {
			r.err = ctx.Err()
			return
		}
		_ = waitHTTP(ctx, "http://"+h.d.ingress+"/healthz", 2*time.Minute)
		cctx, cancel := context.WithTimeout(ctx, time.Minute)
		_ = h.w.catchUp(cctx)
		cancel()
		if ids := h.w.runsOf(r.session); len(ids) > 0 {
			r.runIDs = ids
			for _, id := range ids {
				h.w.waitFinished(ctx, id, h.cfg.RunWait)
			}
			return
		}
	}
}

func isTimeout(err error) bool {
	var t interface{ Timeout() bool }
	return errors.As(err, &t) && t.Timeout()
}

// injectFaults injects cfg.Faults faults, evenly split across the kinds in
// a seeded random order, each after a random pause, releasing the runs of
// each segment just before its pause. It returns after the last fault.
func (h *harness) injectFaults(ctx context.Context) {
	n := h.cfg.Faults
	if n == 0 {
		return
	}
	rng := rand.New(rand.NewPCG(uint64(h.cfg.Seed), 0x636861_6f73))
	kinds := FaultKinds
	if h.cfg.BrokerOutages == OutagesContinuous {
		kinds = []string{FaultKill, FaultStop} // the outages are the broker's faults
	}
	schedule := make([]string, n)
	for i := range schedule {
		schedule[i] = kinds[i%len(kinds)]
	}
	rng.Shuffle(n, func(i, j int) { schedule[i], schedule[j] = schedule[j], schedule[i] })
	for i, kind := range schedule {
		h.released.Store(int64(i))
		// Strike while the segment's runs are in flight: they take a few
		// skill latencies each.
		if sleep(ctx, between(rng, 0, 400*time.Millisecond)) != nil {
			return
		}
		h.inject(ctx, rng, i+1, kind)
	}
	h.released.Store(1 << 40)
}

// inject performs one fault.
func (h *harness) inject(ctx context.Context, rng *rand.Rand, nth int, kind string) {
	h.mu.Lock()
	h.faults[kind]++
	h.mu.Unlock()
	d := h.d
	switch kind {
	case FaultKill:
		names := d.roleNames()
		m := d.members[names[rng.IntN(len(names))]]
		back := between(rng, 200*time.Millisecond, 1500*time.Millisecond)
		h.logf("fault %d/%d: kill -9 %s (%d in flight), restart after %s", nth, h.cfg.Faults, m.name, h.inflight.Load(), back)
		m.halt(syscall.SIGKILL, 5*time.Second)
		_ = sleep(ctx, back)
		if err := d.launch(m); err != nil {
			h.problem("restart %s: %v", m.name, err)
		}
	case FaultNATS:
		h.brokerMu.Lock()
		h.brokerFault(ctx, rng, fmt.Sprintf("fault %d/%d", nth, h.cfg.Faults), between(rng, time.Second, h.cfg.NATSDown))
		h.brokerMu.Unlock()
	case FaultStop:
		names := d.executors()
		m := d.members[names[rng.IntN(len(names))]]
		hold := h.cfg.AckWait + between(rng, 500*time.Millisecond, 2*time.Second)
		h.logf("fault %d/%d: SIGSTOP %s for %s (%d in flight)", nth, h.cfg.Faults, m.name, hold, h.inflight.Load())
		p := m.current()
		if err := p.Signal(syscall.SIGSTOP); err != nil {
			return
		}
		_ = sleep(ctx, hold)
		_ = p.Signal(syscall.SIGCONT)
	}
}

func between(rng *rand.Rand, lo, hi time.Duration) time.Duration {
	return lo + time.Duration(rng.Int64N(int64(hi-lo)+1))
}

// settle waits until every submitted run has a run.finished or ctx ends.
func (h *harness) settle(ctx context.Context, recs []*runRec) {
	h.logf("faults stopped; waiting for unfinished runs (up to %s)", h.cfg.Settle)
	for {
		_ = h.w.catchUp(ctx)
		pending := 0
		for _, r := range recs {
			ids := h.idsOf(r)
			if len(ids) == 0 {
				pending++
			}
			for _, id := range ids {
				if len(h.w.results(id)) == 0 {
					pending++
				}
			}
		}
		if pending == 0 {
			return
		}
		if sleep(ctx, 250*time.Millisecond) != nil {
			h.logf("%d runs still unfinished at the deadline", pending)
			return
		}
	}
}

// idsOf returns every run id of r: the one it submitted or was answered
// with, and for an HTTP run every run requested with its session.
func (h *harness) idsOf(r *runRec) []string {
	ids := append([]string(nil), r.runIDs...)
	if r.viaHTTP {
		for _, id := range h.w.runsOf(r.session) {
			if !contains(ids, id) {
				ids = append(ids, id)
			}
		}
	}
	return ids
}

func contains(s []string, v string) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}

type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}
