package pipeline

import (
	"errors"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/cloudevents/sdk-go/v2/event"
	json "github.com/go-json-experiment/json/v1"

	"github.com/agentbus/agentbus/events"
	"github.com/agentbus/agentbus/handlers/ingress"
	"github.com/agentbus/agentbus/handlers/internal/handlerstest"
	"github.com/agentbus/agentbus/handlers/memory"
	"github.com/agentbus/agentbus/handlers/projector"
	"github.com/agentbus/agentbus/handlers/runctl"
	"github.com/agentbus/agentbus/llm"
	"github.com/agentbus/agentbus/orch"
	"github.com/agentbus/agentbus/store"
)

// homeCityTask is a task only a fact of the user's answers: which city is
// "my home city".
const homeCityTask = "List the active outlets in my home city"

// recallRun drives one run of homeCityTask by user in session of tenant
// handlerstest.Tenant.
func recallRun(t *testing.T, f *flow, runID, user, session string) (orch.RunResult, []event.Event) {
	t.Helper()
	req := orch.RunRequest{RunID: runID, TenantID: handlerstest.Tenant, UserID: user, SessionID: session, Message: homeCityTask}
	ev, err := events.New(runID, events.TypeRunRequested, events.Meta{Tenant: req.TenantID, Session: session, Run: runID}, req)
	if err != nil {
		t.Fatal(err)
	}
	res, seen := f.drive(t, ev)
	if res.TerminalCode != orch.CodeSuccess {
		t.Fatalf("%s ended %s: %s", runID, res.TerminalCode, res.Response)
	}
	return res, seen
}

// recalledIn is the memory.recalled payload of a run's stored trace, nil
// when it has none.
func recalledIn(t *testing.T, env *handlerstest.Env, runID string) []map[string]any {
	t.Helper()
	trace, err := env.Store.Trace(handlerstest.Ctx(t), store.TraceQuery{TenantID: handlerstest.Tenant, PlanID: orch.PlanID(runID)})
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range trace {
		if e.EventType != "memory.recalled" {
			continue
		}
		var p struct {
			Memories []map[string]any `json:"memories"`
		}
		if err := json.Unmarshal(e.Payload, &p); err != nil {
			t.Fatal(err)
		}
		return p.Memories
	}
	return nil
}

// TestRecall_AFactPostedToMemoryAnswersARunInAnotherSession: a fact a
// user posts to POST /agent/memory ("My home city is Melbourne") changes
// the answer of that user's next run in another session: the router
// recalls it, records it in the run state and the trace (memory.recalled,
// with its id and score), and the offline model resolves "my home city"
// with it. Three tenants hold facts for users of the same ids: another
// tenant's facts and another user's are never recalled. The run replays
// from its record without a divergence.
func TestRecall_AFactPostedToMemoryAnswersARunInAnotherSession(t *testing.T) {
	wholeRun(t)
	env := handlerstest.NewEnv(t)
	f := newFlow(t, env, env.Store)
	f.router.Recall = &memory.Recall{Store: env.Store, Embedder: handlerstest.Embedder}
	srv := handlerstest.NewIngressServer(t, env, ingress.IngressConfig{Embedder: handlerstest.Embedder,
		Retention: store.DefaultMemoryRetention})

	// Before any fact, "my home city" names nothing: every active outlet.
	before, _ := recallRun(t, f, "run-recall-before", "u1", "sess-recall-1")
	if !strings.Contains(before.Response, "Harbour Front") || !strings.Contains(before.Response, "Central Station") {
		t.Fatalf("the answer before the fact: %q", before.Response)
	}
	if got := recalledIn(t, env, "run-recall-before"); got != nil {
		t.Fatalf("a run with no fact in scope recalled %v", got)
	}

	post := func(tenant, body string) map[string]any {
		t.Helper()
		r := handlerstest.Call(t, srv, tenant, http.MethodPost, "/agent/memory", body).Want(t, "POST /agent/memory", http.StatusOK)
		return r.Body
	}
	fact := post(handlerstest.Tenant, `{"scope":"user","user_id":"u1","label":"home_city","text":"My home city is Melbourne."}`)
	if fact["key"] != handlerstest.Tenant+":@user:u1:home_city" || fact["ttl_at"] == nil {
		t.Fatalf("POST /agent/memory answered %v, want the key and its ttl_at", fact)
	}
	post(handlerstest.Tenant, `{"scope":"user","user_id":"u2","label":"home_city","text":"My home city is Perth."}`)
	post("tenant-b", `{"scope":"user","user_id":"u1","label":"home_city","text":"My home city is Sydney."}`)
	post("tenant-c", `{"scope":"tenant","label":"home_city","text":"Our home city is Adelaide."}`)

	// u1's next run, in another session: Melbourne's active outlets only.
	res, seen := recallRun(t, f, "run-recall-u1", "u1", "sess-recall-2")
	for _, want := range []string{"Central Station", "Northgate Mall", "Docklands Pier", "(recalled: memory " + fact["key"].(string) + ")"} {
		if !strings.Contains(res.Response, want) {
			t.Errorf("the answer lacks %q: %q", want, res.Response)
		}
	}
	for _, other := range []string{"Harbour Front", "Riverside Walk", "Market Lane"} {
		if strings.Contains(res.Response, other) {
			t.Errorf("the answer names %s, outside Melbourne: %q", other, res.Response)
		}
	}
	// Recalled: the fact and the earlier run's exchange (a successful one
	// is the user's memory too), each with its score.
	rec := recalledIn(t, env, "run-recall-u1")
	if j := slices.IndexFunc(rec, func(m map[string]any) bool { return m["id"] == fact["key"] }); j < 0 ||
		rec[j]["score"].(float64) <= 0 || rec[j]["scope"] != memory.ScopeUser {
		t.Fatalf("memory.recalled = %v, want %s with its score", rec, fact["key"])
	}
	for _, m := range rec {
		if id := m["id"].(string); !strings.HasPrefix(id, handlerstest.Tenant+":") || strings.Contains(id, ":u2:") {
			t.Errorf("u1's run recalled %s", id)
		}
	}
	i := slices.IndexFunc(seen, func(ev event.Event) bool { return ev.Type() == events.TypePlanRequested })
	mems := handlerstest.Decode[orch.PlanRequest](t, seen[i]).Run.Context.Memories
	if !slices.ContainsFunc(mems, func(m llm.RecalledMemory) bool { return m.Text == "My home city is Melbourne." }) {
		t.Fatalf("the run state recorded memories %+v", mems)
	}

	// u2 of the same tenant: their own fact, never u1's.
	res2, _ := recallRun(t, f, "run-recall-u2", "u2", "sess-recall-3")
	if !strings.Contains(res2.Response, "Riverside Walk") || strings.Contains(res2.Response, "Central Station") {
		t.Errorf("u2's answer %q, want Perth's outlet only", res2.Response)
	}

	// The run re-derives from its record: the recalled memories travel in
	// the run state.
	if rep := runctl.ReplayRun("run-recall-u1", seen, runctl.ReplayControls{}); rep.Decisions == 0 ||
		len(rep.Divergences) > 0 || rep.Code != orch.CodeSuccess {
		t.Fatalf("replay: %d decisions, code %s, divergences %+v", rep.Decisions, rep.Code, rep.Divergences)
	}

	// The successful exchange is the user's long-term memory, with its
	// retention.
	m, err := env.Store.GetMemory(handlerstest.Ctx(t), projector.ExchangeKey(handlerstest.Tenant, "u1", "run-recall-u1"))
	if err != nil || m.Scope != memory.ScopeUser {
		t.Fatalf("the exchange in memory: %+v, %v", m.Key, err)
	}
}

// TestRecall_AFailedRunsAnswerIsNotRemembered: a run that ends
// BUDGET_EXHAUSTED appends its exchange to its session's conversation,
// but its answer, unverified, never becomes the user's long-term memory.
func TestRecall_AFailedRunsAnswerIsNotRemembered(t *testing.T) {
	wholeRun(t)
	env := handlerstest.NewEnv(t)
	putPolicy(t, env, `{"defaults":{"tool_calls":1}}`)
	f := newFlow(t, env, env.Store)
	res, _ := f.drive(t, runStart(t, "run-recall-failed", handlerstest.RankTask))
	if res.TerminalCode != orch.CodeBudgetExhausted {
		t.Fatalf("run ended %s, want BUDGET_EXHAUSTED", res.TerminalCode)
	}
	ctx := handlerstest.Ctx(t)
	sess, err := env.Store.GetSession(ctx, handlerstest.Tenant, handlerstest.Session)
	if err != nil || len(sess.Messages) != 2 {
		t.Fatalf("the session holds %+v (%v), want the run's exchange", sess.Messages, err)
	}
	_, err = env.Store.GetMemory(ctx, projector.ExchangeKey(handlerstest.Tenant, handlerstest.User, "run-recall-failed"))
	if !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("the failed run's exchange in memory: %v", err)
	}
}
