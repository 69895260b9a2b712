package ledger_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	json "github.com/go-json-experiment/json/v1"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/agentbus/agentbus/events"
	"github.com/agentbus/agentbus/handlers"
	"github.com/agentbus/agentbus/handlers/ingress"
	"github.com/agentbus/agentbus/handlers/internal/handlerstest"
	"github.com/agentbus/agentbus/handlers/ledger"
	"github.com/agentbus/agentbus/orch"
	"github.com/agentbus/agentbus/store"
)

// Request limits (issue 18): every ingress replica draws from one rate
// window and one set of concurrency leases per tenant, in the limits
// bucket, so the limits hold whichever replica a request reaches.

// replica is one ingress process: its own NATS connection, its own
// Limiter on the shared bucket, its own HTTP server.
func replica(t *testing.T, env *handlerstest.Env, clock *handlerstest.Clock, leaseTTL time.Duration) *httptest.Server {
	t.Helper()
	nc, err := nats.Connect(env.JS.Conn().ConnectedUrl())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	ctx := handlerstest.Ctx(t)
	kv, err := js.KeyValue(ctx, ledger.BucketLimits)
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := js.KeyValue(ctx, handlers.BucketConfig)
	if err != nil {
		t.Fatal(err)
	}
	g := ingress.NewIngress(js, env.Store, handlerstest.NopLog, ingress.IngressConfig{RunTimeout: 20 * time.Second,
		Limiter: &ledger.Limiter{KV: kv, Config: cfg, Now: clock.Now, LeaseTTL: leaseTTL}})
	if err := g.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(g.Stop)
	srv := httptest.NewServer(g.Handler())
	t.Cleanup(srv.Close)
	return srv
}

// fakeRouter answers every run.requested with a run.finished once
// release lets it (at once when release is nil), as the router would.
func fakeRouter(t *testing.T, env *handlerstest.Env, release func(orch.RunRequest) <-chan struct{}) *atomic.Int64 {
	t.Helper()
	ctx := handlerstest.Ctx(t)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var seen atomic.Int64
	sub, err := env.JS.Conn().Subscribe("agent.run.requested.*", func(m *nats.Msg) {
		ev, err := events.FromMsg(m.Header, m.Data)
		if err != nil {
			t.Error(err)
			return
		}
		var req orch.RunRequest
		if err := events.Decode(ev, &req); err != nil {
			t.Error(err)
			return
		}
		seen.Add(1)
		wg.Go(func() {
			if release != nil {
				select {
				case <-release(req):
				case <-stop:
					return
				}
			}
			fin, err := events.Child(ev, "run.finished", events.TypeRunFinished, orch.RunResult{RunID: req.RunID,
				TenantID: req.TenantID, SessionID: req.SessionID, Status: orch.PlanComplete, TerminalCode: orch.CodeSuccess, Response: "ok"})
			if err == nil {
				err = events.Publish(ctx, env.JS, fin)
			}
			select {
			case <-stop: // the test is over: nobody awaits this run
			default:
				if err != nil {
					t.Error(err)
				}
			}
		})
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = sub.Unsubscribe()
		close(stop)
		wg.Wait()
	})
	if err := env.JS.Conn().Flush(); err != nil {
		t.Fatal(err)
	}
	return &seen
}

type limitedAnswer struct {
	status     int
	retryAfter string
	code       string
	runID      string
}

func postJSON(t *testing.T, srv *httptest.Server, tenant, path, body string) limitedAnswer {
	t.Helper()
	req, err := http.NewRequestWithContext(handlerstest.Ctx(t), http.MethodPost, srv.URL+path, strings.NewReader(body))
	if err != nil {
		t.Error(err)
		return limitedAnswer{}
	}
	req.Header.Set("X-Tenant-Id", tenant)
	resp, err := srv.Client().Do(req)
	if err != nil {
		t.Error(err)
		return limitedAnswer{}
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	var body2 struct {
		RunID string `json:"run_id"`
		Error struct {
			Code string `json:"code"`
		} `json:"error"`
	}
	if ct := resp.Header.Get("Content-Type"); ct != "application/json" {
		t.Errorf("%s answered %s with Content-Type %q", path, resp.Status, ct)
	}
	if err := json.Unmarshal(raw, &body2); err != nil {
		t.Errorf("%s: body is not JSON: %s", path, raw)
	}
	return limitedAnswer{status: resp.StatusCode, retryAfter: resp.Header.Get("Retry-After"), code: body2.Error.Code, runID: body2.RunID}
}

func runBody(tenant, session string) string {
	return `{"tenant_id":"` + tenant + `","user_id":"u1","session_id":"` + session + `","message":"hello"}`
}

// burst posts n runs at once, alternating between the replicas.
func burst(t *testing.T, replicas []*httptest.Server, tenant string, n int) []limitedAnswer {
	t.Helper()
	out := make([]limitedAnswer, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { out[i] = postJSON(t, replicas[i%len(replicas)], tenant, "/agent/run", runBody(tenant, "s1")) })
	}
	wg.Wait()
	return out
}

func setLimits(t *testing.T, env *handlerstest.Env, policy string) {
	t.Helper()
	if _, err := env.Config.Put(handlerstest.Ctx(t), ledger.ConfigKeyLimits, []byte(policy)); err != nil {
		t.Fatal(err)
	}
}

// TestRateLimitSharedAcrossTwoIngresses: two ingress replicas, each with
// its own connection and limiter, admit exactly the tenant's configured
// runs per minute between them; the others get 429 rate_limited with
// Retry-After the seconds until one more fits in the sliding minute;
// another tenant's override is its own; POST /agent/events draws from the
// same window; the next minute admits again as the last one slides out.
func TestRateLimitSharedAcrossTwoIngresses(t *testing.T) {
	env := handlerstest.NewEnv(t)
	clock := handlerstest.NewClock(time.Date(2026, 3, 10, 12, 0, 20, 0, time.UTC))
	setLimits(t, env, `{"defaults":{"requests_per_minute":5,"concurrent_runs":100},"tenants":{"beta":{"requests_per_minute":2}}}`)
	replicas := []*httptest.Server{replica(t, env, clock, 0), replica(t, env, clock, 0)}
	fakeRouter(t, env, nil)

	check := func(answers []limitedAnswer, admitted int, retryAfter string) {
		t.Helper()
		ok, limited := 0, 0
		for _, a := range answers {
			switch a.status {
			case http.StatusOK:
				ok++
			case http.StatusTooManyRequests:
				limited++
				if a.code != "rate_limited" || a.retryAfter != retryAfter {
					t.Errorf("429 with code %q and Retry-After %q, want rate_limited and %s", a.code, a.retryAfter, retryAfter)
				}
			default:
				t.Errorf("answer %d (%s), want 200 or 429", a.status, a.code)
			}
		}
		if ok != admitted || limited != len(answers)-admitted {
			t.Fatalf("%d admitted and %d limited of %d, want exactly %d admitted", ok, limited, len(answers), admitted)
		}
	}
	// At 12:00:20, five requests in the window: the sixth fits when 4/5
	// of them still count, 12 s into the next window; beta's two, when
	// half of them do.
	check(burst(t, replicas, "acme", 12), 5, "52")
	check(burst(t, replicas, "beta", 4), 2, "70") // beta's own override, untouched by acme's window

	// A triggered run draws from the same window.
	agent := handlerstest.Call(t, replicas[0], "acme", "POST", "/agent/agents", `{"name":"Support","system_prompt":"Help."}`).Want(t, "agent", http.StatusCreated).Str("agent_id")
	handlerstest.Call(t, replicas[1], "acme", "POST", "/agent/triggers", `{"name":"any","agent_id":"`+agent+`","event_type":"message.new","conditions":{}}`).
		Want(t, "trigger", http.StatusCreated)
	ev := `{"event_type":"message.new","session_id":"s2","data":{"message":{"text":"help"}}}`
	if a := postJSON(t, replicas[1], "acme", "/agent/events", ev); a.status != http.StatusTooManyRequests || a.code != "rate_limited" || a.retryAfter != "52" {
		t.Fatalf("POST /agent/events in a spent window = %+v, want 429 rate_limited after 52 s", a)
	}

	clock.Set(time.Date(2026, 3, 10, 12, 1, 12, 0, time.UTC))
	if a := postJSON(t, replicas[1], "acme", "/agent/events", ev); a.status != http.StatusAccepted {
		t.Fatalf("POST /agent/events once one more fits = %+v, want 202", a)
	}
	check(burst(t, replicas, "acme", 3), 0, "12")
	clock.Set(time.Date(2026, 3, 10, 12, 2, 30, 0, time.UTC)) // the 12:01 window's one request counts half
	check(burst(t, replicas, "acme", 6), 4, "30")
}

// TestConcurrencyLimitSharedAcrossTwoIngresses: with 3 concurrent runs
// allowed, three runs in flight through either replica make the next 429
// concurrency_limited; a run's end (its run.finished, seen by every
// replica) frees its slot; the lease of a run whose end is never seen
// expires after the lease TTL, so a dead process leaks no slot.
func TestConcurrencyLimitSharedAcrossTwoIngresses(t *testing.T) {
	env := handlerstest.NewEnv(t)
	clock := handlerstest.NewClock(time.Date(2026, 3, 10, 12, 0, 0, 0, time.UTC))
	setLimits(t, env, `{"defaults":{"requests_per_minute":1000},"tenants":{"acme":{"concurrent_runs":3}}}`)
	replicas := []*httptest.Server{replica(t, env, clock, 2*time.Minute), replica(t, env, clock, 2*time.Minute)}
	var mu sync.Mutex
	gates := map[string]chan struct{}{}
	var order []string
	seen := fakeRouter(t, env, func(req orch.RunRequest) <-chan struct{} {
		mu.Lock()
		defer mu.Unlock()
		ch := make(chan struct{})
		if req.TenantID != "acme" {
			close(ch) // other tenants' runs finish at once
			return ch
		}
		gates[req.RunID] = ch
		order = append(order, req.RunID)
		return ch
	})
	finish := func(i int) {
		mu.Lock()
		defer mu.Unlock()
		close(gates[order[i]])
	}
	kv, err := env.JS.KeyValue(handlerstest.Ctx(t), ledger.BucketLimits)
	if err != nil {
		t.Fatal(err)
	}
	probe := &ledger.Limiter{KV: kv, Now: clock.Now}
	waitInFlight := func(want int) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for {
			n, err := probe.InFlight(handlerstest.Ctx(t), "acme")
			if err != nil {
				t.Fatal(err)
			}
			if n == want {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("%d runs in flight, want %d", n, want)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}

	answers := make(chan limitedAnswer, 8)
	for i := range 3 {
		go func() { answers <- postJSON(t, replicas[i%2], "acme", "/agent/run", runBody("acme", "s1")) }()
	}
	awaitSeen := func(n int64) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for seen.Load() < n {
			if time.Now().After(deadline) {
				t.Fatalf("%d runs requested, want %d", seen.Load(), n)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	awaitSeen(3)
	for i := range 2 {
		a := postJSON(t, replicas[i], "acme", "/agent/run", runBody("acme", "s1"))
		if a.status != http.StatusTooManyRequests || a.code != "concurrency_limited" || a.retryAfter != "5" {
			t.Fatalf("a 4th run in flight = %+v, want 429 concurrency_limited with Retry-After 5", a)
		}
	}
	if a := postJSON(t, replicas[0], "other", "/agent/run", runBody("other", "s1")); a.status != http.StatusOK {
		// "other" has the default of 10 concurrent runs.
		t.Fatalf("another tenant's run = %+v, want admitted", a)
	}

	finish(0)
	if a := <-answers; a.status != http.StatusOK {
		t.Fatalf("a finished run answered %+v", a)
	}
	waitInFlight(2)
	go func() { answers <- postJSON(t, replicas[1], "acme", "/agent/run", runBody("acme", "s1")) }()
	awaitSeen(5)
	waitInFlight(3)

	// The replicas "die" holding three leases: they expire by themselves.
	clock.Add(2*time.Minute + time.Second)
	waitInFlight(0)
	for i := 1; i < 4; i++ {
		finish(i)
	}
	for range 3 {
		if a := <-answers; a.status != http.StatusOK {
			t.Errorf("run answered %+v", a)
		}
	}
}

// TestLimiterLeasesAndPolicy: a run id that holds a lease is admitted
// again without a second slot (a retried event is the same run); Release
// is idempotent; an invalid limits policy is an error, never "no limits",
// and the ingress answers it 503.
func TestLimiterLeasesAndPolicy(t *testing.T) {
	env := handlerstest.NewEnv(t)
	ctx := handlerstest.Ctx(t)
	l, _ := newTestLimiter(t, env, ledger.TenantLimits{ConcurrentRuns: 2})
	for _, id := range []string{"run-1", "run-1", "run-2"} {
		if a, err := l.Admit(ctx, "acme", id); err != nil || !a.Allowed {
			t.Fatalf("Admit(%s) = %+v, %v", id, a, err)
		}
	}
	if a, err := l.Admit(ctx, "acme", "run-3"); err != nil || a.Allowed || a.Code != "concurrency_limited" || a.Limit != 2 {
		t.Fatalf("a third run = %+v, %v; want concurrency_limited at 2", a, err)
	}
	for range 2 {
		if err := l.Release(ctx, "acme", "run-1"); err != nil {
			t.Fatal(err)
		}
	}
	if n, _ := l.InFlight(ctx, "acme"); n != 1 {
		t.Fatalf("%d in flight after releasing run-1 twice, want 1", n)
	}
	if a, err := l.Admit(ctx, "acme", "run-3"); err != nil || !a.Allowed {
		t.Fatalf("run-3 after a release = %+v, %v", a, err)
	}

	for _, bad := range []string{`{"defaults":{"requests_per_minute":-1}}`, `{"tenant":{}}`, `not json`} {
		setLimits(t, env, bad)
		if _, err := l.Admit(ctx, "acme", ""); err == nil {
			t.Errorf("policy %s admitted", bad)
		}
	}
	srv := handlerstest.NewIngressServer(t, env, ingress.IngressConfig{Limiter: l})
	if a := postJSON(t, srv, "acme", "/agent/run", runBody("acme", "s1")); a.status != http.StatusServiceUnavailable || a.code != "unavailable" {
		t.Fatalf("a run under an invalid limits policy = %+v, want 503 unavailable", a)
	}
}

// TestRepeatedEventHoldsNoLease: an inbound event delivered again after
// its run finished is that run (nothing new starts) and takes no
// concurrency slot, whether the stream's duplicate window catches it
// (the lease just taken is freed at once, since no run.finished will free
// it) or the run's plan is stored already (no lease is taken).
func TestRepeatedEventHoldsNoLease(t *testing.T) {
	env := handlerstest.NewEnv(t)
	ctx := handlerstest.Ctx(t)
	l, clock := newTestLimiter(t, env, ledger.TenantLimits{ConcurrentRuns: 1, RequestsPerMinute: 100})
	srv := handlerstest.NewIngressServer(t, env, ingress.IngressConfig{Limiter: l})
	const tenant = "acme"
	agent := handlerstest.Call(t, srv, tenant, "POST", "/agent/agents", `{"name":"Support","system_prompt":"Help."}`).Want(t, "agent", http.StatusCreated).Str("agent_id")
	handlerstest.Call(t, srv, tenant, "POST", "/agent/triggers", `{"name":"all","agent_id":"`+agent+`","event_type":"message.new","conditions":{}}`).
		Want(t, "trigger", http.StatusCreated)
	post := func(id, session string) handlerstest.DefResponse {
		return handlerstest.Call(t, srv, tenant, "POST", "/agent/events", `{"event_id":"`+id+`","event_type":"message.new","session_id":"`+session+`","message":"hi"}`)
	}
	first := post("evt-1", "s1").Want(t, "evt-1", http.StatusAccepted)
	if first.Body["duplicate"] == true {
		t.Fatalf("the first delivery answered %v", first.Body)
	}
	post("evt-2", "s2").Want(t, "a second run while evt-1's holds the only slot", http.StatusTooManyRequests, "concurrency_limited")
	// evt-1's run finishes: every ingress releases its lease.
	if err := l.Release(ctx, tenant, first.Str("run_id")); err != nil {
		t.Fatal(err)
	}
	// Delivered again within the duplicate window, before any plan is
	// stored: the same run, and the slot is free again at once.
	again := post("evt-1", "s1").Want(t, "evt-1 again", http.StatusAccepted)
	if again.Body["duplicate"] != true || again.Str("run_id") != first.Str("run_id") {
		t.Fatalf("evt-1 again answered %v, want the same run as a duplicate", again.Body)
	}
	if n, _ := l.InFlight(ctx, tenant); n != 0 {
		t.Fatalf("%d runs in flight after a repeated event, want 0", n)
	}
	// Past the window the run's plan tells: no lease, no run.requested.
	second := post("evt-2", "s2").Want(t, "evt-2", http.StatusAccepted)
	if err := env.Store.PutPlan(ctx, store.Plan{PlanID: second.Str("plan_id"), TenantID: tenant, SessionID: "s2", Status: store.PlanStatusComplete,
		CreatedAt: clock.Now()}, 1); err != nil {
		t.Fatal(err)
	}
	if err := l.Release(ctx, tenant, second.Str("run_id")); err != nil {
		t.Fatal(err)
	}
	late := post("evt-2", "s2").Want(t, "evt-2 again", http.StatusOK)
	if late.Body["duplicate"] != true || late.Str("run_id") != second.Str("run_id") {
		t.Fatalf("evt-2 again answered %v", late.Body)
	}
	if n, _ := l.InFlight(ctx, tenant); n != 0 {
		t.Fatalf("%d runs in flight after a repeated event, want 0", n)
	}
	post("evt-3", "s3").Want(t, "a new event once the slot is free", http.StatusAccepted)
}

// TestLimiterRefusalsSpendNothing: a run refused for concurrency draws
// nothing from the rate window (an inbound event redelivered until a slot
// frees does not spend the tenant's rate), and one refused for the rate
// gives back the slot it took.
func TestLimiterRefusalsSpendNothing(t *testing.T) {
	env := handlerstest.NewEnv(t)
	ctx := handlerstest.Ctx(t)
	l, clock := newTestLimiter(t, env, ledger.TenantLimits{ConcurrentRuns: 1, RequestsPerMinute: 2})
	admit := func(run string) ledger.Admission {
		t.Helper()
		a, err := l.Admit(ctx, "acme", run)
		if err != nil {
			t.Fatal(err)
		}
		return a
	}
	if a := admit("run-1"); !a.Allowed {
		t.Fatalf("run-1 = %+v", a)
	}
	for range 5 {
		if a := admit("run-2"); a.Allowed || a.Code != "concurrency_limited" {
			t.Fatalf("run-2 while run-1 runs = %+v, want concurrency_limited", a)
		}
	}
	if err := l.Release(ctx, "acme", "run-1"); err != nil {
		t.Fatal(err)
	}
	// Five concurrency refusals spent none of the two requests a minute.
	if a := admit("run-2"); !a.Allowed {
		t.Fatalf("run-2 once run-1 ended = %+v, want admitted (the rate's second request)", a)
	}
	if err := l.Release(ctx, "acme", "run-2"); err != nil {
		t.Fatal(err)
	}
	if a := admit("run-3"); a.Allowed || a.Code != "rate_limited" {
		t.Fatalf("a third request in the minute = %+v, want rate_limited", a)
	}
	if n, _ := l.InFlight(ctx, "acme"); n != 0 {
		t.Fatalf("%d runs in flight after a rate refusal, want 0: the slot was not given back", n)
	}
	// A minute and a half on, half of the last window's two requests
	// still count: one more fits.
	clock.Add(time.Minute + 30*time.Second)
	if a := admit("run-3"); !a.Allowed {
		t.Fatalf("run-3 half a minute into the next window = %+v", a)
	}
}

// TestRateWindowSlides: the rate is a sliding minute, so a burst at the
// end of one window and another at the start of the next admit the limit
// between them, not twice it; Retry-After is when one more request fits,
// and a request then is admitted.
func TestRateWindowSlides(t *testing.T) {
	env := handlerstest.NewEnv(t)
	ctx := handlerstest.Ctx(t)
	l, clock := newTestLimiter(t, env, ledger.TenantLimits{ConcurrentRuns: 100, RequestsPerMinute: 10})
	burst := func(n int) (admitted int, retry time.Duration) {
		t.Helper()
		for range n {
			a, err := l.Admit(ctx, "acme", "")
			if err != nil {
				t.Fatal(err)
			}
			if a.Allowed {
				admitted++
			} else {
				retry = a.RetryAfter
			}
		}
		return admitted, retry
	}
	clock.Add(59 * time.Second) // 12:00:59
	if n, _ := burst(10); n != 10 {
		t.Fatalf("%d of 10 admitted in a fresh minute", n)
	}
	clock.Add(2 * time.Second) // 12:01:01: 59/60 of the last window's 10 still count
	n, retry := burst(10)
	if n != 0 {
		t.Fatalf("%d more admitted two seconds after a full burst, across the window's turn", n)
	}
	if retry != 5*time.Second { // at 12:01:06, 9 of the 10 count
		t.Fatalf("Retry-After %s, want 5s", retry)
	}
	clock.Add(retry)
	if n, retry = burst(3); n != 1 || retry != 6*time.Second {
		t.Fatalf("after Retry-After: %d admitted (want 1), then Retry-After %s (want 6s)", n, retry)
	}
	// Once the last window has slid out, the limit is whole again but
	// for this window's own request.
	clock.Set(time.Date(2026, 3, 10, 12, 2, 30, 0, time.UTC))
	if n, _ := burst(12); n != 9 { // the 12:01 window's 1 counts half
		t.Fatalf("%d admitted at 12:02:30, want 9", n)
	}
}

// newTestLimiter is a limiter on env's limits bucket and config, with
// defaults and a test clock.
func newTestLimiter(t *testing.T, env *handlerstest.Env, defaults ledger.TenantLimits) (*ledger.Limiter, *handlerstest.Clock) {
	t.Helper()
	kv, err := env.JS.KeyValue(handlerstest.Ctx(t), ledger.BucketLimits)
	if err != nil {
		t.Fatal(err)
	}
	clock := handlerstest.NewClock(time.Date(2026, 3, 10, 12, 0, 0, 0, time.UTC))
	return &ledger.Limiter{KV: kv, Config: env.Config, Now: clock.Now, Defaults: defaults}, clock
}
