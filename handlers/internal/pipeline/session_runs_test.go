package pipeline

import (
	"slices"
	"strings"
	"testing"

	"github.com/cloudevents/sdk-go/v2/event"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/agentbus/agentbus/events"
	"github.com/agentbus/agentbus/handlers"
	"github.com/agentbus/agentbus/handlers/ingress"
	"github.com/agentbus/agentbus/handlers/internal/handlerstest"
	"github.com/agentbus/agentbus/handlers/runctl"
	"github.com/agentbus/agentbus/orch"
)

// sessionRunsKey is the key of the test session's queue in the
// session_runs bucket; a queued run's request is under it plus its run id.
const sessionRunsKey = handlerstest.Tenant + "." + handlerstest.Session

// TestSessionRuns_OneAtATimeInArrivalOrder: runs of one session that
// arrive while one of them is in flight are queued (run.queued, with
// their place and the run ahead) and start in arrival order, each once
// the one before it ended, so each sees the exchange before it in its
// history; a run of another session is not held; a redelivered request
// of a queued run stays where it is.
func TestSessionRuns_OneAtATimeInArrivalOrder(t *testing.T) {
	wholeRun(t)
	env := handlerstest.NewEnv(t)
	ctx := handlerstest.Ctx(t)
	kv := sessionRunsBucket(t, env)
	f := newFlow(t, env, env.Store)
	f.router.SessionRuns = &runctl.SessionRuns{KV: kv}
	messages := map[string]string{"run-a": handlerstest.RankTask + " for the first report", "run-b": handlerstest.RankTask + " for the second report",
		"run-c": handlerstest.RankTask + " for the third report"}
	req := func(id string) event.Event {
		return handlerstest.NewEvent(t, id, events.TypeRunRequested, handlerstest.RunRequest(id, messages[id]))
	}
	queuedAs := func(outs []event.Event) map[string]any {
		t.Helper()
		if len(outs) != 1 || len(handlerstest.AuditPayloads(t, outs, handlers.AuditRunQueued)) != 1 {
			t.Fatalf("a queued run's hop emitted %v, want its run.queued alone", handlerstest.Types(outs))
		}
		return handlerstest.AuditPayloads(t, outs, handlers.AuditRunQueued)[0]
	}

	if _, err := f.router.Handle(ctx, req("run-a")); err != nil {
		t.Fatal(err)
	}
	for i, id := range []string{"run-b", "run-c", "run-b"} {
		outs, err := f.router.Handle(ctx, req(id))
		if err != nil {
			t.Fatal(err)
		}
		want := map[string]any{"position": float64(1 + i%2), "behind": "run-a"}
		if q := queuedAs(outs); q["position"] != want["position"] || q["behind"] != want["behind"] {
			t.Fatalf("%s queued as %v, want %v", id, q, want)
		}
	}
	// Another session's run starts at once.
	other := handlerstest.RunRequest("run-other", handlerstest.RankTask)
	other.SessionID = "another-session"
	outs, err := f.router.Handle(ctx, handlerstest.NewEvent(t, "run-other", events.TypeRunRequested, other))
	if err != nil || len(handlerstest.OfType(outs, events.TypePlanRequested)) != 1 {
		t.Fatalf("another session's run: %v, %v", handlerstest.Types(outs), err)
	}

	// run-a's request again (as a redelivery would bring it) drives it;
	// each end starts the next.
	f.runs = 3
	_, seen := f.drive(t, req("run-a"))
	var ended []string
	for _, res := range f.finished {
		if res.TerminalCode != orch.CodeSuccess {
			t.Fatalf("%s ended %s: %s", res.RunID, res.TerminalCode, res.Reason)
		}
		ended = append(ended, res.RunID)
	}
	if !slices.Equal(ended, []string{"run-a", "run-b", "run-c"}) {
		t.Fatalf("runs ended in the order %v", ended)
	}
	// Each run started with the exchanges of the runs before it.
	for _, id := range []string{"run-b", "run-c"} {
		var history []string
		for _, ev := range handlerstest.OfType(seen, events.TypePlanRequested) {
			if events.MetaOf(ev).Run != id {
				continue
			}
			for _, m := range handlerstest.Decode[orch.PlanRequest](t, ev).Run.Context.History {
				history = append(history, m.Content)
			}
			break
		}
		if !strings.Contains(strings.Join(history, "\n"), messages["run-a"]) ||
			id == "run-c" && !strings.Contains(strings.Join(history, "\n"), messages["run-b"]) {
			t.Errorf("%s started with the history %q", id, history)
		}
	}
	e, err := kv.Get(ctx, sessionRunsKey)
	if err != nil || string(e.Value()) != "{}" {
		t.Fatalf("the session's entry after its runs: %s, %v", e.Value(), err)
	}
	if keys, _ := kv.ListKeys(ctx); keys != nil {
		for k := range keys.Keys() {
			if strings.Count(k, ".") == 2 {
				t.Errorf("a queued request is still kept: %s", k)
			}
		}
	}
}

// TestSessionRuns_EndsWhileQueuedAndLostRequests: a run that ends while
// queued (its request dead-lettered) leaves the queue; a queued run whose
// kept request is gone is skipped rather than holding the session; the
// end of a run that is not the session's (or a second end of one) starts
// nothing new while another run is in flight.
func TestSessionRuns_EndsWhileQueuedAndLostRequests(t *testing.T) {
	wholeRun(t)
	env := handlerstest.NewEnv(t)
	ctx := handlerstest.Ctx(t)
	kv := sessionRunsBucket(t, env)
	s := &runctl.SessionRuns{KV: kv}
	admit := func(id string) *runctl.Queued {
		t.Helper()
		q, err := s.Admit(ctx, handlerstest.RunRequest(id, "hello"))
		if err != nil {
			t.Fatal(err)
		}
		return q
	}
	next := func(id string) string {
		t.Helper()
		r, err := s.Next(ctx, handlerstest.RunRequest(id, "hello"))
		if err != nil {
			t.Fatal(err)
		}
		if r == nil {
			return ""
		}
		return r.RunID
	}
	if admit("r1") != nil {
		t.Fatal("r1 queued in an idle session")
	}
	for i, id := range []string{"r2", "r3", "r4"} {
		if q := admit(id); q == nil || q.Position != i+1 || q.Behind != "r1" {
			t.Fatalf("%s: %+v", id, q)
		}
	}
	// r2's request is dead-lettered: it ends while queued.
	if n := next("r2"); n != "" {
		t.Fatalf("r2's end, with r1 in flight, started %q", n)
	}
	// r3's kept request expired.
	if err := kv.Purge(ctx, sessionRunsKey+".r3"); err != nil {
		t.Fatal(err)
	}
	if n := next("r1"); n != "r4" {
		t.Fatalf("after r1 the next run is %q, want r4 (r2 ended, r3 lost)", n)
	}
	if n := next("r1"); n != "r4" {
		t.Fatalf("r1's end again submits %q, want r4 once more (same id)", n)
	}
	if admit("r4") != nil {
		t.Fatal("r4 still queued on its turn")
	}
	if n := next("r1"); n != "" {
		t.Fatalf("r1's end, with r4 in flight, started %q", n)
	}
	if _, err := kv.Get(ctx, sessionRunsKey+".r4"); err == nil {
		t.Fatal("r4's request is still kept once it started")
	}
}

// TestSessionRuns_CancelAQueuedRun: a queued run, which has no plan yet,
// is found by POST /agent/runs/{id}/cancel of its tenant (another
// tenant's caller gets 404); it ends USER_CANCEL when its turn comes,
// without routing, and the session goes on.
func TestSessionRuns_CancelAQueuedRun(t *testing.T) {
	wholeRun(t)
	env := handlerstest.NewEnv(t)
	ctx := handlerstest.Ctx(t)
	kv := sessionRunsBucket(t, env)
	f := newFlow(t, env, env.Store)
	f.router.SessionRuns = &runctl.SessionRuns{KV: kv}
	f.router.Cancels = handlerstest.StartCancels(t, env)
	srv := handlerstest.NewIngressServer(t, env, ingress.IngressConfig{Cancels: runctl.NewCancels(env.Cancels)})
	req := func(id string) event.Event {
		return handlerstest.NewEvent(t, id, events.TypeRunRequested, handlerstest.RunRequest(id, handlerstest.RankTask))
	}
	if _, err := f.router.Handle(ctx, req("run-first")); err != nil {
		t.Fatal(err)
	}
	outs, err := f.router.Handle(ctx, req("run-waiting"))
	if err != nil || len(handlerstest.AuditPayloads(t, outs, handlers.AuditRunQueued)) != 1 {
		t.Fatalf("run-waiting: %v, %v", handlerstest.Types(outs), err)
	}
	for _, ev := range outs { // the projector records run.queued
		if _, err := f.proj.Handle(ctx, ev); err != nil {
			t.Fatal(err)
		}
	}
	handlerstest.CheckHTTP(t, srv, handlerstest.HTTPCase{Method: "POST", Path: "/agent/runs/run-waiting/cancel", Headers: handlerstest.AsTenant("acme"),
		WantStatus: 404, WantCode: "not_found"})
	body := handlerstest.CheckHTTP(t, srv, handlerstest.HTTPCase{Method: "POST", Path: "/agent/runs/run-waiting/cancel", Headers: handlerstest.AsTenant(handlerstest.Tenant),
		WantStatus: 202})
	if body["plan_id"] != orch.PlanID("run-waiting") || body["status"] != "cancelling" {
		t.Fatalf("cancel of a queued run: %v", body)
	}
	handlerstest.WaitFor(t, "the cancel of run-waiting", func() bool { _, ok := f.router.Cancels.Lookup(handlerstest.Tenant, "run-waiting"); return ok })

	f.runs = 2
	_, seen := f.drive(t, req("run-first"))
	if a, b := f.finished[0], f.finished[1]; a.RunID != "run-first" || a.TerminalCode != orch.CodeSuccess ||
		b.RunID != "run-waiting" || b.TerminalCode != orch.CodeUserCancel {
		t.Fatalf("ended %s %s, then %s %s", a.RunID, a.TerminalCode, b.RunID, b.TerminalCode)
	}
	for _, ev := range handlerstest.OfType(seen, events.AuditType("routing.decided")) {
		if events.MetaOf(ev).Run == "run-waiting" {
			t.Fatal("the cancelled run was routed")
		}
	}
	if n := len(handlerstest.OfType(seen, events.AuditType("routing.decided"))); n != 1 {
		t.Fatalf("%d runs routed, want run-first's alone", n)
	}
	if e, err := kv.Get(ctx, sessionRunsKey); err != nil || string(e.Value()) != "{}" {
		t.Fatalf("the session after its runs: %v", err)
	}
}

// sessionRunsBucket is env's session_runs bucket.
func sessionRunsBucket(t *testing.T, env *handlerstest.Env) jetstream.KeyValue {
	t.Helper()
	kv, err := env.JS.KeyValue(handlerstest.Ctx(t), runctl.BucketSessionRuns)
	if err != nil {
		t.Fatal(err)
	}
	return kv
}
