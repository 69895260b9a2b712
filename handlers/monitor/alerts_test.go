package monitor_test

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/cloudevents/sdk-go/v2/event"
	json "github.com/go-json-experiment/json/v1"

	"github.com/agentbus/agentbus/events"
	"github.com/agentbus/agentbus/handlers"
	"github.com/agentbus/agentbus/handlers/health"
	"github.com/agentbus/agentbus/handlers/internal/handlerstest"
	"github.com/agentbus/agentbus/handlers/monitor"
	"github.com/agentbus/agentbus/handlers/projector"
	"github.com/agentbus/agentbus/orch"
	"github.com/agentbus/agentbus/store"
)

// hook is a webhook receiver that checks each POST's signature.
type hook struct {
	mu     sync.Mutex
	secret []byte
	alerts []monitor.Alert
	fail   bool
	bad    int // posts whose signature did not verify
}

func (h *hook) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.fail {
		http.Error(w, "down", http.StatusServiceUnavailable)
		return
	}
	want := (&monitor.Webhook{Secret: h.secret}).Signature(r.Header.Get("X-Agentbus-Timestamp"), body)
	if r.Header.Get("X-Agentbus-Signature") != want {
		h.bad++
		http.Error(w, "bad signature", http.StatusUnauthorized)
		return
	}
	var a monitor.Alert
	_ = json.Unmarshal(body, &a)
	h.alerts = append(h.alerts, a)
}

func (h *hook) received() []monitor.Alert {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Clone(h.alerts)
}

// seedRuns stores n run.finished events of the test tenant that ended
// with code, at now less a few seconds each.
func seedRuns(t *testing.T, env *handlerstest.Env, now time.Time, code string, n int, from int) {
	t.Helper()
	var docs []store.Event
	for i := from; i < from+n; i++ {
		payload, _ := json.Marshal(map[string]any{"terminal_code": code, "status": "done", "task_type": "research"})
		ev := handlerstest.NewEvent(t, fmt.Sprintf("fin-%d", i), events.AuditType("run.finished"), events.Audit{PlanID: "plan-x", Payload: payload})
		ev.SetTime(now.Add(-time.Duration(i+1) * time.Second))
		doc, err := projector.AuditDoc(ev)
		if err != nil {
			t.Fatal(err)
		}
		docs = append(docs, doc)
	}
	if err := env.Store.AppendEvents(handlerstest.Ctx(t), docs); err != nil {
		t.Fatal(err)
	}
}

// TestAlerts_SuccessDropsThenRecovers: with 3 of 5 runs successful in the
// last hour the plan_success_low alert fires (alert.fired, a signed
// webhook POST, the next evaluation scheduled a minute ahead); evaluated
// again unchanged, it fires nothing more; a webhook that fails fails the
// message and changes nothing, so its redelivery sends the change; after
// five more successes (8 of 10) it resolves, with the same alert id, and
// nothing more is scheduled.
func TestAlerts_SuccessDropsThenRecovers(t *testing.T) {
	env := handlerstest.NewEnv(t)
	kv, err := env.JS.KeyValue(handlerstest.Ctx(t), handlers.BucketAlerts)
	if err != nil {
		t.Fatal(err)
	}
	h := &hook{secret: []byte("whsec-test")}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	now := time.Now().UTC()
	m := &monitor.Monitor{Store: env.Store, KV: kv, Webhook: &monitor.Webhook{URL: srv.URL, Secret: h.secret}, Now: func() time.Time { return now }, Log: handlerstest.NopLog}
	evaluate := func(id string) ([]event.Event, error) {
		return m.Handle(handlerstest.Ctx(t), handlerstest.NewEvent(t, id, events.TypeAlertEvaluate, handlers.AlertEvaluate{TenantID: handlerstest.Tenant}))
	}
	audits := func(outs []event.Event) (names []string, scheduled int) {
		for _, o := range outs {
			if o.Type() == events.TypeAlertEvaluate && o.Extensions()[events.ExtDeliverAt] != nil {
				scheduled++
			} else {
				names = append(names, events.AuditName(o.Type()))
			}
		}
		return names, scheduled
	}

	seedRuns(t, env, now, orch.CodeSuccess, 3, 0)
	seedRuns(t, env, now, orch.CodeBudgetExhausted, 2, 3)
	outs, err := evaluate("eval-1")
	if err != nil {
		t.Fatal(err)
	}
	if names, scheduled := audits(outs); !slices.Equal(names, []string{"alert.fired"}) || scheduled != 1 {
		t.Fatalf("at 60 %% success: %v, %d scheduled", names, scheduled)
	}
	fired := handlerstest.Decode[events.Audit](t, outs[0])
	var a monitor.Alert
	if err := json.Unmarshal(fired.Payload, &a); err != nil || a.Rule != "plan_success_low" || a.Value != 0.6 || a.State != monitor.AlertFiring {
		t.Fatalf("alert.fired %s (%v)", fired.Payload, err)
	}
	if got := h.received(); len(got) != 1 || got[0].ID != a.ID || got[0].State != monitor.AlertFiring || h.bad != 0 {
		t.Fatalf("webhook got %+v (%d bad signatures)", got, h.bad)
	}

	if outs, err := evaluate("eval-2"); err != nil || len(outs) != 1 {
		t.Fatalf("unchanged: %d outputs (%v), want only the next evaluation", len(outs), err)
	}

	seedRuns(t, env, now, orch.CodeSuccess, 5, 5)
	h.mu.Lock()
	h.fail = true
	h.mu.Unlock()
	if _, err := evaluate("eval-3"); err == nil {
		t.Fatal("a failed webhook did not fail the evaluation")
	}
	h.mu.Lock()
	h.fail = false
	h.mu.Unlock()
	outs, err = evaluate("eval-3")
	if err != nil {
		t.Fatal(err)
	}
	if names, scheduled := audits(outs); !slices.Equal(names, []string{"alert.resolved"}) || scheduled != 0 {
		t.Fatalf("at 80 %% success: %v, %d scheduled", names, scheduled)
	}
	got := h.received()
	if len(got) != 2 || got[1].State != monitor.AlertResolved || got[1].ID != a.ID || got[1].ResolvedAt.IsZero() {
		t.Fatalf("webhook got %+v", got)
	}
}

// TestAlerts_ThresholdsOfEveryRule: each rule of seed 000 fires past its
// threshold and not at it.
func TestAlerts_ThresholdsOfEveryRule(t *testing.T) {
	judge := func(name string, h health.Health) bool {
		i := slices.IndexFunc(monitor.AlertRules, func(r monitor.AlertRule) bool { return r.Name == name })
		_, fires := monitor.AlertRules[i].Judge(h)
		return fires
	}
	for _, tc := range []struct {
		rule        string
		at, past    health.Health
		description string
	}{
		{"plan_success_low", health.Health{Runs: 5, SuccessRate: 0.8}, health.Health{Runs: 5, SuccessRate: 0.79}, "success below 80 %"},
		{"replan_exhaustion_high", health.Health{ReplanExhaustionRate: 0.05}, health.Health{ReplanExhaustionRate: 0.06}, "exhaustion above 5 %"},
		{"contract_violation", health.Health{}, health.Health{ContractViolations: 1}, "any contract violation"},
		{"python_timeouts_high", health.Health{PythonTimeoutRate: 0.05}, health.Health{PythonTimeoutRate: 0.051}, "timeouts above 5 %"},
		{"memory_lock_wait_high", health.Health{MemoryLockWaitMaxMS: 2000}, health.Health{MemoryLockWaitMaxMS: 2001}, "lock wait above 2 s"},
	} {
		if judge(tc.rule, tc.at) || !judge(tc.rule, tc.past) {
			t.Errorf("%s: %s", tc.rule, tc.description)
		}
	}
	if judge("plan_success_low", health.Health{}) {
		t.Error("no runs fired plan_success_low")
	}
}

// TestAlerts_AFinishedRunSchedulesItsTenantsEvaluation: the projector
// that stores a run.finished schedules the tenant's alert.evaluate at the
// next minute, one per tenant and minute: the process sends it once, and
// another process's would have the same id.
func TestAlerts_AFinishedRunSchedulesItsTenantsEvaluation(t *testing.T) {
	env := handlerstest.NewEnv(t)
	now := time.Date(2026, 11, 25, 9, 30, 12, 0, time.UTC)
	p := &projector.Projector{Store: env.Store, Alerts: true, Now: func() time.Time { return now }}
	var ids []string
	finish := func(i int) []event.Event {
		t.Helper()
		payload, _ := json.Marshal(map[string]any{"terminal_code": orch.CodeSuccess})
		outs, err := p.Handle(handlerstest.Ctx(t), handlerstest.NewEvent(t, fmt.Sprintf("fin-%d", i), events.AuditType("run.finished"),
			events.Audit{PlanID: "plan-x", Payload: payload}))
		if err != nil {
			t.Fatalf("run.finished %d: %v", i, err)
		}
		return outs
	}
	outs := finish(0)
	if len(outs) != 1 || outs[0].Type() != events.TypeAlertEvaluate {
		t.Fatalf("run.finished: %d outputs", len(outs))
	}
	if at := events.Ext(outs[0], events.ExtDeliverAt); at != "2026-11-25T09:31:00Z" {
		t.Fatalf("scheduled at %s", at)
	}
	ids = append(ids, outs[0].ID())
	if outs := finish(1); len(outs) != 0 {
		t.Fatalf("a second run in the minute sent %d more triggers", len(outs))
	}
	other := &projector.Projector{Store: env.Store, Alerts: true, Now: func() time.Time { return now }}
	p = other // another process in the same minute: the same trigger
	outs = finish(2)
	if len(outs) != 1 {
		t.Fatalf("another process's run.finished: %d outputs", len(outs))
	}
	ids = append(ids, outs[0].ID())
	if ids[0] != ids[1] {
		t.Fatal("two runs in one minute scheduled two evaluations")
	}
	now = now.Add(time.Minute)
	if outs := finish(3); len(outs) != 1 || outs[0].ID() == ids[0] {
		t.Fatalf("the next minute's run.finished: %d outputs", len(outs))
	}
	if outs, err := p.Handle(handlerstest.Ctx(t), handlerstest.NewEvent(t, "other", events.AuditType("skill.called"), events.Audit{})); err != nil || len(outs) != 0 {
		t.Fatalf("a skill.called scheduled %d (%v)", len(outs), err)
	}
}
