package pipeline

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/agentbus/agentbus/events"
	"github.com/agentbus/agentbus/handlers/internal/handlerstest"
	"github.com/agentbus/agentbus/handlers/ledger"
	"github.com/agentbus/agentbus/llm"
	"github.com/agentbus/agentbus/llm/offline"
	"github.com/agentbus/agentbus/orch"
)

// Token quotas (issue 18): every model call of a run draws its tokens
// from the quotas of its tenant (per UTC day and month), its agent (per
// day) and its session (in total) besides its own budget, in the quotas
// bucket, so a tenant's quota holds across its runs and sessions.

// quotaEnv is newEnv whose ledger enforces quotas on a clock the test
// moves: today's noon (UTC) plus days.
func quotaEnv(t *testing.T) (*handlerstest.Env, *time.Duration) {
	t.Helper()
	env := handlerstest.NewEnv(t)
	kv, err := env.JS.KeyValue(handlerstest.Ctx(t), ledger.BucketQuotas)
	if err != nil {
		t.Fatal(err)
	}
	st, err := kv.Status(handlerstest.Ctx(t))
	if err != nil || st.TTL() != ledger.QuotaEntryTTL {
		t.Fatalf("quotas bucket TTL %v (%v), want %v: period entries must expire", st.TTL(), err, ledger.QuotaEntryTTL)
	}
	now := time.Now().UTC()
	offset := new(time.Duration)
	*offset = time.Date(now.Year(), now.Month(), now.Day(), 12, 0, 0, 0, time.UTC).Sub(now)
	env.Budgets.Quotas = kv
	env.Budgets.Now = func() time.Time { return time.Now().Add(*offset) }
	return env, offset
}

func quotaRun(t *testing.T, env *handlerstest.Env, runID, tenant, session string) (orch.RunResult, []string) {
	t.Helper()
	f := patternFlow(t, env, offline.New())
	req := handlerstest.RunRequest(runID, handlerstest.RankTask)
	req.TenantID, req.SessionID = tenant, session
	ev, err := events.New(runID, events.TypeRunRequested, events.Meta{Tenant: tenant, Session: session, Run: runID}, req)
	if err != nil {
		t.Fatal(err)
	}
	res, seen := f.drive(t, ev)
	return res, []string{handlerstest.ExhaustedDim(t, seen)}
}

// TestQuota_TenantDailyBudgetStopsRunsAcrossSessions: a tenant's daily
// token quota, spent by a run in one session, stops the tenant's next run
// in another session BUDGET_EXHAUSTED, with the quota named in its detail
// and trace; another tenant is unaffected; the next day the tenant runs
// again.
func TestQuota_TenantDailyBudgetStopsRunsAcrossSessions(t *testing.T) {
	wholeRun(t)
	env, offset := quotaEnv(t)
	ctx := handlerstest.Ctx(t)
	// What one run spends, with no quota.
	setPolicy(t, env, `{"defaults":{"wall_clock_s":200000}}`)
	calib, _ := quotaRun(t, env, "run-quota-calibrate", "calib", "s0")
	spent := float64(calib.Usage.InputTokens + calib.Usage.OutputTokens)
	if calib.TerminalCode != orch.CodeSuccess || spent < 100 {
		t.Fatalf("calibration run %s with %g tokens", calib.TerminalCode, spent)
	}
	// Half a run more than one run: the first fits, the second cannot.
	daily := float64(int(spent * 1.5))
	setPolicy(t, env, fmt.Sprintf(`{"defaults":{"wall_clock_s":200000},"quotas":{"tenants":{"*":{"daily_tokens":%g}}}}`, daily))
	dayQuota := orch.Quota{Scope: orch.QuotaTenant, Subject: handlerstest.Tenant, Period: orch.PeriodDay, Tokens: daily}

	first, _ := quotaRun(t, env, "run-quota-a", handlerstest.Tenant, "session-a")
	if first.TerminalCode != orch.CodeSuccess {
		t.Fatalf("the first run ended %s (%s) within its quota", first.TerminalCode, first.Reason)
	}
	usedA, err := env.Budgets.QuotaUsed(ctx, handlerstest.Tenant, dayQuota, env.Budgets.Now())
	if err != nil || usedA < spent*0.8 || usedA > daily {
		t.Fatalf("the tenant's daily ledger holds %g (%v) after a run of about %g tokens, quota %g", usedA, err, spent, daily)
	}

	second, dims := quotaRun(t, env, "run-quota-b", handlerstest.Tenant, "session-b")
	if second.TerminalCode != orch.CodeBudgetExhausted {
		t.Fatalf("the second run ended %s (%s), want BUDGET_EXHAUSTED: the day's quota is spent", second.TerminalCode, second.Reason)
	}
	if dims[0] != string(ledger.DimQuotaTokens) {
		t.Errorf("the trace's budget stop names %q, want %s", dims[0], ledger.DimQuotaTokens)
	}
	for _, want := range []string{`"scope":"tenant"`, `"period":"day"`, `"subject":"` + handlerstest.Tenant + `"`} {
		if !strings.Contains(string(second.Detail), want) {
			t.Errorf("the result's detail %s does not name %s", second.Detail, want)
		}
	}
	usedB, err := env.Budgets.QuotaUsed(ctx, handlerstest.Tenant, dayQuota, env.Budgets.Now())
	if err != nil || usedB < usedA || usedB > daily+spent*0.5 {
		t.Fatalf("the daily ledger holds %g (%v) after the stopped run (%g before, quota %g)", usedB, err, usedA, daily)
	}

	other, _ := quotaRun(t, env, "run-quota-other", "gamma", "session-b")
	if other.TerminalCode != orch.CodeSuccess {
		t.Fatalf("another tenant's run ended %s (%s): its quota is its own", other.TerminalCode, other.Reason)
	}

	*offset += 24 * time.Hour
	next, _ := quotaRun(t, env, "run-quota-next-day", handlerstest.Tenant, "session-b")
	if next.TerminalCode != orch.CodeSuccess {
		t.Fatalf("the next day's run ended %s (%s), want SUCCESS on a fresh daily quota", next.TerminalCode, next.Reason)
	}
}

// TestQuota_AgentSessionAndMonthlyQuotas drives the ledger directly: an
// agent's daily quota, a session's total and the tenant's monthly quota
// each refuse the draw that would pass them, naming themselves, and a
// refused draw takes nothing from any quota or from the run's budget.
func TestQuota_AgentSessionAndMonthlyQuotas(t *testing.T) {
	wholeRun(t)
	env, offset := quotaEnv(t)
	ctx := handlerstest.Ctx(t)
	policy := orch.BudgetPolicy{Quotas: &orch.Quotas{
		Tenants:       map[string]orch.TokenQuota{handlerstest.Tenant: {DailyTokens: 1000, MonthlyTokens: 1500}},
		Agents:        map[string]orch.TokenQuota{handlerstest.Tenant + "/agent-1": {DailyTokens: 300}, "*": {DailyTokens: 1000}},
		SessionTokens: 500}}
	if err := policy.Validate(); err != nil {
		t.Fatal(err)
	}
	*offset = time.Until(time.Date(2026, 3, 10, 12, 0, 0, 0, time.UTC))
	run := func(id, agent, session string) ledger.RunBudget {
		return ledger.NewRunBudget(handlerstest.Tenant, id, orch.DefaultLimits, env.Budgets.Now().Add(time.Hour), policy.QuotasFor(handlerstest.Tenant, agent, session))
	}
	tokens := func(n float64) orch.Vector { return orch.Vector{orch.DimInputTokens: n, orch.DimModelCalls: 1} }
	used := func(q orch.Quota) float64 {
		u, err := env.Budgets.QuotaUsed(ctx, handlerstest.Tenant, q, env.Budgets.Now())
		if err != nil {
			t.Fatal(err)
		}
		return u
	}
	refusedBy := func(err error, scope, period string) {
		t.Helper()
		var ex *ledger.Exhausted
		if !errors.As(err, &ex) || ex.Quota == nil || ex.Quota.Scope != scope || ex.Quota.Period != period || ex.Dim != ledger.DimQuotaTokens {
			t.Fatalf("draw = %v, want refused by the %s %s quota", err, scope, period)
		}
	}
	tenantDay := orch.Quota{Scope: orch.QuotaTenant, Subject: handlerstest.Tenant, Period: orch.PeriodDay}

	r1 := run("run-q1", "agent-1", "s1")
	if err := env.Budgets.Reserve(ctx, r1, tokens(250)); err != nil {
		t.Fatal(err)
	}
	refusedBy(env.Budgets.Reserve(ctx, r1, tokens(100)), orch.QuotaAgent, orch.PeriodDay)
	if u := used(tenantDay); u != 250 {
		t.Fatalf("tenant's day ledger %g after a refused draw, want 250", u)
	}
	if e := r1.Used(); e[orch.DimInputTokens] != 250 || e[orch.DimModelCalls] != 1 {
		t.Fatalf("run ledger %+v after a refused draw, want the first draw only", e)
	}
	// Another agent in the same session: the session's total binds.
	r2 := run("run-q2", "agent-2", "s1")
	if err := env.Budgets.Reserve(ctx, r2, tokens(200)); err != nil {
		t.Fatal(err)
	}
	refusedBy(env.Budgets.Reserve(ctx, r2, tokens(100)), orch.QuotaSession, orch.PeriodTotal)
	// A settlement below the reservation gives tokens back.
	if err := env.Budgets.Settle(ctx, r2, tokens(200), tokens(120)); err != nil {
		t.Fatal(err)
	}
	if u := used(orch.Quota{Scope: orch.QuotaSession, Subject: "s1", Period: orch.PeriodTotal}); u != 370 {
		t.Fatalf("session ledger %g after settling 200 as 120, want 370", u)
	}

	// Next day: the day is fresh, the month is not.
	*offset += 24 * time.Hour
	r3 := run("run-q3", "agent-3", "s2")
	if err := env.Budgets.Reserve(ctx, r3, tokens(450)); err != nil {
		t.Fatal(err)
	}
	*offset += 24 * time.Hour
	r4 := run("run-q4", "agent-3", "s3")
	refusedBy(env.Budgets.Reserve(ctx, r4, tokens(700)), orch.QuotaTenant, orch.PeriodMonth) // 370+450+700 > 1500
	if err := env.Budgets.Reserve(ctx, r4, tokens(400)); err != nil {
		t.Fatalf("a draw within the month's remainder: %v", err)
	}
	// The first of the next month starts a new monthly count.
	*offset = time.Until(time.Date(2026, 4, 1, 0, 0, 1, 0, time.UTC))
	r5 := run("run-q5", "agent-3", "s4")
	if err := env.Budgets.Reserve(ctx, r5, tokens(450)); err != nil {
		t.Fatalf("a new month's draw: %v", err)
	}
}

// maxed is a model with a maximum output that answers with 200 output
// tokens and its input estimate, recording each call's max_tokens.
type maxed struct{ maxTokens *[]int }

func (m maxed) MaxOutputTokens() int { return 1000 }

func (m maxed) Complete(_ context.Context, req llm.Request) (llm.Response, error) {
	*m.maxTokens = append(*m.maxTokens, req.MaxTokens)
	return llm.Response{Message: llm.Message{Role: llm.RoleAssistant, Content: "ok"},
		Usage: llm.Usage{InputTokens: llm.EstimateInputTokens(req), OutputTokens: 200}}, nil
}

// TestQuota_ModelCallCappedAtWhatTheQuotaLeaves: the model wrapper
// reserves a call's input and maximum output from the quotas; when the
// quota leaves less output than the maximum the call is made with
// max_tokens capped at what is left, and when it leaves not even the
// input the call is not made.
func TestQuota_ModelCallCappedAtWhatTheQuotaLeaves(t *testing.T) {
	wholeRun(t)
	env, _ := quotaEnv(t)
	ctx := handlerstest.Ctx(t)
	req := llm.NewRequest(llm.TaskSynthesize, llm.SynthInput{Task: strings.Repeat("rank the outlets by engagement ", 60)})
	in := llm.EstimateInputTokens(req)
	if in <= 300 {
		t.Fatalf("input estimate %d: the test needs more than 300", in)
	}
	// First call: in+1000 reserved, in+200 used. Second: 500 left after
	// its input. Third: less than its input left.
	daily := float64(2*in + 700)
	p := orch.BudgetPolicy{Quotas: &orch.Quotas{Tenants: map[string]orch.TokenQuota{handlerstest.Tenant: {DailyTokens: daily}}}}
	rb := ledger.NewRunBudget(handlerstest.Tenant, "run-capped", orch.DefaultLimits, env.Budgets.Now().Add(time.Hour), p.QuotasFor(handlerstest.Tenant, "", "s1"))
	var maxTokens []int
	m := env.Budgets.Model(maxed{&maxTokens}, rb)
	for i := range 2 {
		if _, err := m.Complete(ctx, req); err != nil {
			t.Fatalf("call %d: %v", i+1, err)
		}
	}
	_, err := m.Complete(ctx, req)
	var ex *ledger.Exhausted
	if !errors.As(err, &ex) || ex.Quota == nil || ex.Quota.Period != orch.PeriodDay {
		t.Fatalf("third call = %v, want refused by the daily quota", err)
	}
	if len(maxTokens) != 2 || maxTokens[0] < 1000 || maxTokens[1] != 500 {
		t.Fatalf("max_tokens of the calls made %v, want the maximum, then 500", maxTokens)
	}
	used, err := env.Budgets.QuotaUsed(ctx, handlerstest.Tenant, rb.Quotas[0], env.Budgets.Now())
	if err != nil || used != float64(2*(in+200)) {
		t.Fatalf("quota ledger %g (%v), want the two calls' %d tokens", used, err, 2*(in+200))
	}
}
