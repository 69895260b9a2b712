package pipeline

import (
	"fmt"
	"math"
	"net/url"
	"slices"
	"testing"
	"time"

	"github.com/cloudevents/sdk-go/v2/event"
	json "github.com/go-json-experiment/json/v1"

	"github.com/agentbus/agentbus/events"
	"github.com/agentbus/agentbus/handlers/health"
	"github.com/agentbus/agentbus/handlers/ingress"
	"github.com/agentbus/agentbus/handlers/internal/handlerstest"
	"github.com/agentbus/agentbus/handlers/projector"
	"github.com/agentbus/agentbus/orch"
	"github.com/agentbus/agentbus/skills/demo"
	"github.com/agentbus/agentbus/store"
)

// TestHealth_OfSeededRunsWithKnownOutcomes drives five runs through the
// real roles into the store: one whose first skill call hangs and finds
// its replans exhausted (BUDGET_EXHAUSTED), one whose hang replans into
// SUCCESS, three plain successes. The tenant's plan health,
// computed from the store over the window, gives each figure as the
// recorded runs say: success 3/5 (4/5 completed), replan exhaustion 1/5,
// 1 replan in 5 runs, the steps that failed by skill, every skill call
// and step counted, the p95 of the steps'
// durations, the runs' tokens and cost; another tenant's health is empty.
func TestHealth_OfSeededRunsWithKnownOutcomes(t *testing.T) {
	wholeRun(t)
	env := handlerstest.NewEnvWith(t, demo.Config{HangFirst: map[string]int{demo.SkillOutletList: 2}})
	f := newFlow(t, env, env.Store)
	f.exec.SkillTimeout = 300 * time.Millisecond
	since := time.Now().Add(-time.Minute)
	var seen []event.Event
	var results []orch.RunResult
	for i, policy := range []string{`{"defaults":{"reflection_passes":0}}`, `{"defaults":{}}`, "", "", ""} {
		if policy != "" {
			putPolicy(t, env, policy)
		}
		res, s := f.drive(t, runStart(t, fmt.Sprintf("run-health-%d", i), handlerstest.RankTask))
		seen, results = append(seen, s...), append(results, res)
	}
	codes := map[string]int{}
	var in, out int
	var cost float64
	for _, r := range results {
		codes[r.TerminalCode]++
		in, out, cost = in+r.Usage.InputTokens, out+r.Usage.OutputTokens, cost+r.Usage.CostUSD
	}
	if codes[orch.CodeSuccess] != 4 || results[0].TerminalCode != orch.CodeBudgetExhausted || results[1].Decision == nil ||
		results[1].Decision.ReplanAttempts != 1 {
		for _, r := range results {
			t.Logf("%s %s: %s", r.RunID, r.TerminalCode, r.Reason)
		}
		t.Fatalf("seeded runs ended %v", codes)
	}

	h, err := health.TenantHealth(handlerstest.Ctx(t), env.Store, handlerstest.Tenant, since, time.Now().Add(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	// What the recorded streams say, counted independently of the store.
	calls := handlerstest.AuditPayloads(t, seen, "skill.called")
	var durations []int64
	for _, p := range handlerstest.AuditPayloads(t, seen, "subagent.finish") {
		durations = append(durations, int64(p["duration_ms"].(float64)))
	}
	// Success is seed 000's: SUCCESS without a replan (3 of 5); 4 of 5
	// completed.
	if h.Runs != 5 || h.TerminalCodes[orch.CodeSuccess] != 4 || h.SuccessRate != 0.6 || h.CompletedRate != 0.8 {
		t.Errorf("runs %d, codes %v, success %v, completed %v", h.Runs, h.TerminalCodes, h.SuccessRate, h.CompletedRate)
	}
	// outlet_list's steps: the two that hung failed, the replanned one and
	// three plain ones completed; engagement_analytics's four completed.
	if r := h.StepFailureRateBySkill; len(r) != 2 || math.Abs(r[demo.SkillOutletList]-1.0/3) > 1e-9 || r[demo.SkillEngagementAnalytics] != 0 {
		t.Errorf("step failure rate by skill %v", r)
	}
	if h.ReplanExhaustionRate != 0.2 || len(h.AvgReplansByTaskType) != 1 {
		t.Errorf("replan exhaustion %v, replans by task type %v", h.ReplanExhaustionRate, h.AvgReplansByTaskType)
	}
	for taskType, avg := range h.AvgReplansByTaskType {
		if avg != 0.2 || taskType == "" {
			t.Errorf("%s runs replanned %v times on average, want 1 in 5", taskType, avg)
		}
	}
	if h.SkillCalls != len(calls) || h.SkillCalls == 0 || h.SkillFailureRate[demo.SkillOutletList] != 0 || h.LargeResponseRate != 0 {
		t.Errorf("skill calls %d (recorded %d), failure rates %v, large %v", h.SkillCalls, len(calls), h.SkillFailureRate, h.LargeResponseRate)
	}
	if h.Steps != len(durations) || h.SubagentP95MS != nearestRank(durations, 0.95) || h.ContractViolationRate != 0 {
		t.Errorf("steps %d (recorded %d), p95 %d ms, contract violations %v", h.Steps, len(durations), h.SubagentP95MS, h.ContractViolationRate)
	}
	var writes, maxWait int64
	for _, p := range handlerstest.AuditPayloads(t, seen, "memory.written") {
		writes, maxWait = writes+1, max(maxWait, int64(p["lock_wait_ms"].(float64)))
	}
	if int64(h.MemoryWrites) != writes || writes == 0 || h.MemoryLockWaitMaxMS != maxWait || h.PythonRuns != 0 {
		t.Errorf("memory writes %d (recorded %d), longest lock wait %d ms (recorded %d), python runs %d", h.MemoryWrites, writes,
			h.MemoryLockWaitMaxMS, maxWait, h.PythonRuns)
	}
	if h.InputTokens != in || h.OutputTokens != out || math.Abs(h.CostUSD-cost) > 1e-6 || in == 0 {
		t.Errorf("tokens %d/%d cost %v, the runs say %d/%d %v", h.InputTokens, h.OutputTokens, h.CostUSD, in, out, cost)
	}
	if other, err := health.TenantHealth(handlerstest.Ctx(t), env.Store, "acme", since, time.Now()); err != nil || other.Runs != 0 || other.SkillCalls != 0 {
		t.Errorf("another tenant's health: %+v, %v", other, err)
	}

	// The recent runs, newest first, as the dashboard lists them.
	srv := handlerstest.NewIngressServer(t, env, ingress.IngressConfig{})
	body := handlerstest.CheckHTTP(t, srv, handlerstest.HTTPCase{Method: "GET", Path: "/agent/runs?limit=4", Headers: handlerstest.AsTenant(handlerstest.Tenant), WantStatus: 200})
	runs, _ := body["runs"].([]any)
	if len(runs) != 4 {
		t.Fatalf("recent runs: %v", body)
	}
	for i, r := range runs {
		want := results[len(results)-1-i]
		if got := r.(map[string]any); got["plan_id"] != want.PlanID || got["terminal_code"] != want.TerminalCode {
			t.Errorf("recent run %d: %v, want %s %s", i, got, want.PlanID, want.TerminalCode)
		}
	}
}

// TestAuditQuery_SkillCallsByTenantSkillTimeAndLargeResponse: the
// projector copies a skill call's figures into the event's queryable
// fields; GET /agent/audit/events filters the caller's tenant's events by
// type, skill, time range and the large-response flag, newest first, and
// refuses a malformed query with a stable code.
func TestAuditQuery_SkillCallsByTenantSkillTimeAndLargeResponse(t *testing.T) {
	wholeRun(t)
	env := handlerstest.NewEnv(t)
	srv := handlerstest.NewIngressServer(t, env, ingress.IngressConfig{})
	now := time.Now().UTC().Truncate(time.Second)
	var docs []store.Event
	for i, c := range []struct {
		tenant, skill string
		large         bool
		ago           time.Duration
	}{
		{handlerstest.Tenant, demo.SkillMenuCatalog, true, time.Hour},
		{handlerstest.Tenant, demo.SkillMenuCatalog, false, 2 * time.Hour},
		{handlerstest.Tenant, demo.SkillOutletList, false, 3 * time.Hour},
		{handlerstest.Tenant, demo.SkillMenuCatalog, true, 10 * 24 * time.Hour}, // outside the last 7 days
		{"acme", demo.SkillMenuCatalog, true, time.Hour},
	} {
		payload, _ := json.Marshal(map[string]any{"skill_id": c.skill, "duration_ms": 120 + i, "input_size_bytes": 17,
			"response_size_bytes": 1_048_576, "large_response_triggered": c.large, "is_error": false})
		ev, err := events.New(fmt.Sprintf("audit-%d", i), events.AuditType("skill.called"),
			events.Meta{Tenant: c.tenant, Session: handlerstest.Session, Run: "run-a"}, events.Audit{PlanID: "plan-a", SkillID: c.skill, Payload: payload})
		if err != nil {
			t.Fatal(err)
		}
		ev.SetTime(now.Add(-c.ago))
		doc, err := projector.AuditDoc(ev)
		if err != nil {
			t.Fatal(err)
		}
		if doc.DurationMS != int64(120+i) || doc.ResponseBytes != 1_048_576 || doc.LargeResponse != c.large || doc.Outcome != "ok" {
			t.Fatalf("figures of %s: %+v", ev.ID(), doc)
		}
		docs = append(docs, doc)
	}
	if err := env.Store.AppendEvents(handlerstest.Ctx(t), docs); err != nil {
		t.Fatal(err)
	}
	query := func(q url.Values) []string {
		body := handlerstest.CheckHTTP(t, srv, handlerstest.HTTPCase{Method: "GET", Path: "/agent/audit/events?" + q.Encode(), Headers: handlerstest.AsTenant(handlerstest.Tenant), WantStatus: 200})
		var ids []string
		for _, e := range body["events"].([]any) {
			ids = append(ids, e.(map[string]any)["event_id"].(string))
		}
		return ids
	}
	for name, tc := range map[string]struct {
		q    url.Values
		want string
	}{
		"large responses of the last 7 days": {url.Values{"type": {"skill.called"}, "since": {"168h"}, "large_response": {"true"}}, "[audit-0]"},
		"one skill, newest first":            {url.Values{"skill": {demo.SkillMenuCatalog}}, "[audit-0 audit-1 audit-3]"},
		"not large":                          {url.Values{"large_response": {"false"}}, "[audit-1 audit-2]"},
		"a time range":                       {url.Values{"since": {now.Add(-150 * time.Minute).Format(time.RFC3339)}, "until": {now.Add(-90 * time.Minute).Format(time.RFC3339)}}, "[audit-1]"},
		"a limit":                            {url.Values{"limit": {"2"}}, "[audit-0 audit-1]"},
		"another type":                       {url.Values{"type": {"model.called"}}, "[]"},
	} {
		if got := fmt.Sprint(query(tc.q)); got != tc.want {
			t.Errorf("%s: %s, want %s", name, got, tc.want)
		}
	}
	for _, tc := range []handlerstest.HTTPCase{
		{Name: "no tenant", Method: "GET", Path: "/agent/audit/events", WantStatus: 400, WantCode: "tenant_required"},
		{Name: "bad flag", Method: "GET", Path: "/agent/audit/events?large_response=maybe", Headers: handlerstest.AsTenant(handlerstest.Tenant), WantStatus: 400, WantCode: "invalid_request"},
		{Name: "bad since", Method: "GET", Path: "/agent/audit/events?since=yesterday", Headers: handlerstest.AsTenant(handlerstest.Tenant), WantStatus: 400, WantCode: "invalid_request"},
		{Name: "bad limit", Method: "GET", Path: "/agent/audit/events?limit=0", Headers: handlerstest.AsTenant(handlerstest.Tenant), WantStatus: 400, WantCode: "invalid_request"},
		{Name: "health, bad window", Method: "GET", Path: "/agent/health?window=-1h", Headers: handlerstest.AsTenant(handlerstest.Tenant), WantStatus: 400, WantCode: "invalid_request"},
	} {
		t.Run(tc.Name, func(t *testing.T) { handlerstest.CheckHTTP(t, srv, tc) })
	}
	body := handlerstest.CheckHTTP(t, srv, handlerstest.HTTPCase{Method: "GET", Path: "/agent/health?window=168h", Headers: handlerstest.AsTenant(handlerstest.Tenant), WantStatus: 200})
	if body["skill_calls"] != float64(3) || body["large_response_rate"] != 1.0/3 || body["tenant_id"] != handlerstest.Tenant {
		t.Errorf("health of the last 7 days: %v", body)
	}
}

// nearestRank is the p-th percentile of vs by nearest rank, 0 for none.
func nearestRank(vs []int64, p float64) int64 {
	if len(vs) == 0 {
		return 0
	}
	sorted := slices.Sorted(slices.Values(vs))
	return sorted[int(math.Ceil(p*float64(len(sorted))))-1]
}
