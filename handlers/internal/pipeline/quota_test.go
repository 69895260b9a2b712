package pipeline

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cloudevents/sdk-go/v2/event"

	"github.com/agentbus/agentbus/events"
	"github.com/agentbus/agentbus/handlers/internal/handlerstest"
	"github.com/agentbus/agentbus/handlers/ledger"
	"github.com/agentbus/agentbus/llm"
	"github.com/agentbus/agentbus/llm/offline"
	"github.com/agentbus/agentbus/orch"
)

// Token quotas: a run leases tokens from the quotas of its tenant (per UTC
// day and month), its agent (per day) and its session (in total) when it
// starts, draws its model calls from the lease in memory, raises the lease
// when it needs more, and settles it when it ends, so a tenant's quota
// holds across its runs and sessions (handlers/ledger/quota.go).

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

func quotaRun(t *testing.T, env *handlerstest.Env, runID, tenant, session string) (orch.RunResult, []event.Event) {
	t.Helper()
	f := patternFlow(t, env, offline.New())
	req := handlerstest.RunRequest(runID, handlerstest.RankTask)
	req.TenantID, req.SessionID = tenant, session
	ev, err := events.New(runID, events.TypeRunRequested, events.Meta{Tenant: tenant, Session: session, Run: runID}, req)
	if err != nil {
		t.Fatal(err)
	}
	return f.drive(t, ev)
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

	first, seenA := quotaRun(t, env, "run-quota-a", handlerstest.Tenant, "session-a")
	if first.TerminalCode != orch.CodeSuccess {
		t.Fatalf("the first run ended %s (%s) within its quota", first.TerminalCode, first.Reason)
	}
	usedA, heldA, err := env.Budgets.QuotaUsed(ctx, handlerstest.Tenant, dayQuota, env.Budgets.Now())
	if err != nil || usedA < spent*0.8 || usedA > daily || heldA != 0 {
		t.Fatalf("the tenant's daily ledger holds %g used, %g leased (%v) after a run of about %g tokens, quota %g", usedA, heldA, err, spent, daily)
	}
	// Its lease was taken when it started and settled when it ended.
	resolved := handlerstest.AuditPayloads(t, seenA, "budget.resolved")
	if len(resolved) != 1 || resolved[0]["quota_lease"] == nil {
		t.Fatalf("budget.resolved %v has no quota_lease", resolved)
	}
	settled := handlerstest.AuditPayloads(t, seenA, "quota.settled")
	if len(settled) != 1 || settled[0]["used"] != float64(first.Usage.InputTokens+first.Usage.OutputTokens) {
		t.Fatalf("quota.settled %v, want one with the run's %d tokens", settled, first.Usage.InputTokens+first.Usage.OutputTokens)
	}

	second, seenB := quotaRun(t, env, "run-quota-b", handlerstest.Tenant, "session-b")
	if second.TerminalCode != orch.CodeBudgetExhausted {
		t.Fatalf("the second run ended %s (%s), want BUDGET_EXHAUSTED: the day's quota is spent", second.TerminalCode, second.Reason)
	}
	if dim := handlerstest.ExhaustedDim(t, seenB); dim != string(ledger.DimQuotaTokens) {
		t.Errorf("the trace's budget stop names %q, want %s", dim, ledger.DimQuotaTokens)
	}
	for _, want := range []string{`"scope":"tenant"`, `"period":"day"`, `"subject":"` + handlerstest.Tenant + `"`} {
		if !strings.Contains(string(second.Detail), want) {
			t.Errorf("the result's detail %s does not name %s", second.Detail, want)
		}
	}
	usedB, heldB, err := env.Budgets.QuotaUsed(ctx, handlerstest.Tenant, dayQuota, env.Budgets.Now())
	if err != nil || usedB < usedA || usedB > daily || heldB != 0 {
		t.Fatalf("the daily ledger holds %g used, %g leased (%v) after the stopped run (%g before, quota %g): never past it", usedB, heldB, err, usedA, daily)
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

// TestQuota_LeasesOfAgentSessionAndMonthlyQuotas drives the ledger
// directly: a run's lease is taken once and drawn in memory, raised when
// the run needs more (no further than a quota has left), refused by the
// quota that has nothing left (naming it), settled once with what the run
// used; a lease never settled is charged whole after its deadline; the
// next day's quota is fresh and the month's is not.
func TestQuota_LeasesOfAgentSessionAndMonthlyQuotas(t *testing.T) {
	wholeRun(t)
	env, offset := quotaEnv(t)
	ctx := handlerstest.Ctx(t)
	policy := orch.BudgetPolicy{Quotas: &orch.Quotas{
		Tenants:       map[string]orch.TokenQuota{handlerstest.Tenant: {DailyTokens: 64_000, MonthlyTokens: 60_000}},
		Agents:        map[string]orch.TokenQuota{handlerstest.Tenant + "/agent-1": {DailyTokens: 3_000}, "*": {DailyTokens: 100_000}},
		SessionTokens: 100_000}}
	if err := policy.Validate(); err != nil {
		t.Fatal(err)
	}
	*offset = time.Until(time.Date(2026, 3, 10, 12, 0, 0, 0, time.UTC))
	run := func(id, agent, session string) ledger.RunBudget {
		return ledger.NewRunBudget(handlerstest.Tenant, id, orch.DefaultLimits, env.Budgets.Now().Add(time.Hour), policy.QuotasFor(handlerstest.Tenant, agent, session))
	}
	open := func(rb ledger.RunBudget) (ledger.RunBudget, *orch.QuotaLease, error) {
		lease, err := env.Budgets.OpenLease(ctx, rb)
		return rb.WithLease(lease), lease, err
	}
	tokens := func(n float64) orch.Vector { return orch.Vector{orch.DimInputTokens: n, orch.DimModelCalls: 1} }
	ledgerOf := func(q orch.Quota) (used, held float64) {
		t.Helper()
		used, held, err := env.Budgets.QuotaUsed(ctx, handlerstest.Tenant, q, env.Budgets.Now())
		if err != nil {
			t.Fatal(err)
		}
		return used, held
	}
	refusedBy := func(err error, scope, period string) {
		t.Helper()
		var ex *ledger.Exhausted
		if !errors.As(err, &ex) || ex.Quota == nil || ex.Quota.Scope != scope || ex.Quota.Period != period || ex.Dim != ledger.DimQuotaTokens {
			t.Fatalf("draw = %v, want refused by the %s %s quota", err, scope, period)
		}
	}
	settle := func(rb ledger.RunBudget, lease *orch.QuotaLease, quotas []orch.Quota) bool {
		t.Helper()
		s := orch.RunState{Request: orch.RunRequest{TenantID: handlerstest.Tenant, RunID: rb.RunID}}
		s.Budget.Lease, s.Budget.Quotas = lease, quotas
		u := rb.Used()
		s.Usage.InputTokens, s.Usage.OutputTokens = int(u[orch.DimInputTokens]), int(u[orch.DimOutputTokens])
		ok, err := env.Budgets.SettleLease(ctx, s)
		if err != nil {
			t.Fatal(err)
		}
		return ok
	}
	tenantDay := orch.Quota{Scope: orch.QuotaTenant, Subject: handlerstest.Tenant, Period: orch.PeriodDay}
	agentDay := orch.Quota{Scope: orch.QuotaAgent, Subject: "agent-1", Period: orch.PeriodDay}
	month := orch.Quota{Scope: orch.QuotaTenant, Subject: handlerstest.Tenant, Period: orch.PeriodMonth}

	// The lease: a chunk (2,048 tokens here) of each quota, but no more
	// than a quarter of what one has left (the agent's 3,000: 1 + 749);
	// taken again for the same run, the same lease.
	r1, lease1, err := open(run("run-q1", "agent-1", "s1"))
	if err != nil || lease1 == nil || lease1.Tokens != 750 || len(lease1.Keys) != 4 {
		t.Fatalf("lease %+v (%v), want 750 tokens from 4 quotas", lease1, err)
	}
	if again, err := env.Budgets.OpenLease(ctx, run("run-q1", "agent-1", "s1")); err != nil || again.Tokens != lease1.Tokens {
		t.Fatalf("the lease taken again: %+v (%v), want the same", again, err)
	}
	if _, held := ledgerOf(tenantDay); held != 2048 {
		t.Fatalf("tenant's day holds %g, want a chunk, 2048", held)
	}
	// Draws within it touch no quota.
	if err := env.Budgets.Reserve(ctx, r1, tokens(500)); err != nil {
		t.Fatal(err)
	}
	if used, held := ledgerOf(agentDay); used != 0 || held != 750 {
		t.Fatalf("agent's day %g used %g held after a draw within the lease, want 0 and 750", used, held)
	}
	// Past it, the lease is raised where it is short: to what the run
	// needs (2,000) and a quarter of what is left beyond (250); the
	// tenant's day holds enough and is left as it is.
	if err := env.Budgets.Reserve(ctx, r1, tokens(1500)); err != nil {
		t.Fatal(err)
	}
	if _, held := ledgerOf(agentDay); held != 2250 {
		t.Fatalf("agent's day holds %g after the raise, want 2250", held)
	}
	if _, held := ledgerOf(tenantDay); held != 2048 {
		t.Fatalf("tenant's day holds %g after the raise, want its 2048 still", held)
	}
	// To all of the agent's 3,000 a day: nothing is left for another run
	// of the agent, refused at its start, nor for a raise past it.
	if err := env.Budgets.Reserve(ctx, r1, tokens(1000)); err != nil {
		t.Fatal(err)
	}
	if _, _, err := open(run("run-q2", "agent-1", "s2")); err == nil {
		t.Fatal("a run of an agent whose day is leased whole got a lease")
	} else {
		refusedBy(err, orch.QuotaAgent, orch.PeriodDay)
	}
	refusedBy(env.Budgets.Reserve(ctx, r1, tokens(600)), orch.QuotaAgent, orch.PeriodDay)
	if e := r1.Used(); e[orch.DimInputTokens] != 3000 {
		t.Fatalf("run ledger %+v after a refused draw, want the three draws only", e)
	}
	// The last draw used 500 of its 1,000; settled, the run is charged
	// what it used, once, and the rest is free again.
	if err := env.Budgets.Settle(ctx, r1, tokens(1000), tokens(500)); err != nil {
		t.Fatal(err)
	}
	if !settle(r1, lease1, r1.Quotas) || settle(r1, lease1, r1.Quotas) {
		t.Fatal("the lease settled, then settled again: want true, then false")
	}
	if used, held := ledgerOf(agentDay); used != 2500 || held != 0 {
		t.Fatalf("agent's day %g used %g held after the settlement, want 2500 and 0", used, held)
	}
	r2, lease2, err := open(run("run-q2", "agent-1", "s2"))
	if err != nil || lease2.Tokens != 125 { // 1 + a quarter of the 499 beyond it
		t.Fatalf("lease %+v (%v) of the agent's last 500", lease2, err)
	}
	if !settle(r2, lease2, r2.Quotas) {
		t.Fatal("an unused lease did not settle")
	}

	// A lease its run never settles is charged whole an hour after the
	// run's deadline, when the next draw finds it.
	lost := run("run-q-lost", "agent-2", "s3")
	lost.Deadline = env.Budgets.Now().Add(-2 * time.Hour)
	if _, err := env.Budgets.OpenLease(ctx, lost); err != nil {
		t.Fatal(err)
	}
	r3, lease3, err := open(run("run-q3", "agent-2", "s4"))
	if err != nil {
		t.Fatal(err)
	}
	if used, _ := ledgerOf(tenantDay); used != 2500+2048 {
		t.Fatalf("tenant's day used %g after a lost lease expired, want 4548", used)
	}

	settle(r3, lease3, r3.Quotas)

	// Next day: the day is fresh, the month is not (60,000 a month, 4,548
	// charged).
	*offset += 24 * time.Hour
	big := func(id string) ledger.RunBudget { return run(id, "agent-3", id) }
	r4, _, err := open(big("run-q4"))
	if err != nil {
		t.Fatal(err)
	}
	if err := env.Budgets.Reserve(ctx, r4, tokens(9_000)); err != nil { // 9,000 + a chunk
		t.Fatal(err)
	}
	if used, held := ledgerOf(month); used != 4548 || held != 11_048 {
		t.Fatalf("the month %g used %g held, want 4548 and 11048", used, held)
	}
	// 59,000 fit the day's 64,000, not what the month has left.
	refusedBy(env.Budgets.Reserve(ctx, r4, tokens(50_000)), orch.QuotaTenant, orch.PeriodMonth)
	if _, held := ledgerOf(tenantDay); held != 11_048 {
		t.Fatalf("the day holds %g after the month refused the raise, want 11048: the day's raise taken back", held)
	}
	// The first of the next month starts a new monthly count.
	*offset = time.Until(time.Date(2026, 4, 1, 0, 0, 1, 0, time.UTC))
	r5, _, err := open(big("run-q5"))
	if err == nil {
		err = env.Budgets.Reserve(ctx, r5, tokens(50_000))
	}
	if err != nil {
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
// reserves a call's input and maximum output from the run's lease; when the
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
	// The run's lease holds the whole quota: nothing is charged until it
	// ends.
	used, held, err := env.Budgets.QuotaUsed(ctx, handlerstest.Tenant, rb.Quotas[0], env.Budgets.Now())
	if err != nil || used != 0 || held != daily || rb.Used()[orch.DimInputTokens]+rb.Used()[orch.DimOutputTokens] != float64(2*(in+200)) {
		t.Fatalf("quota ledger %g used %g held (%v), run %v: want the lease of all %g and the two calls' %d tokens", used, held, err, rb.Used(), daily, 2*(in+200))
	}
}

// TestQuota_DefaultDailyQuota: a router with a default daily quota
// (DEFAULT_DAILY_TOKENS) gives it to every tenant the budget policy gives
// none: a run records it and is stopped by it; the policy's own "*"
// entry, even an empty one, replaces it.
func TestQuota_DefaultDailyQuota(t *testing.T) {
	wholeRun(t)
	env, _ := quotaEnv(t)
	setPolicy(t, env, `{"defaults":{"wall_clock_s":200000}}`)
	drive := func(runID string) (orch.RunResult, []event.Event) {
		f := patternFlow(t, env, offline.New())
		f.router.DailyTokens = 1000 // less than one run uses
		req := handlerstest.RunRequest(runID, handlerstest.RankTask)
		ev, err := events.New(runID, events.TypeRunRequested, events.Meta{Tenant: req.TenantID, Session: req.SessionID, Run: runID}, req)
		if err != nil {
			t.Fatal(err)
		}
		return f.drive(t, ev)
	}
	res, seen := drive("run-default-quota")
	if res.TerminalCode != orch.CodeBudgetExhausted || !strings.Contains(string(res.Detail), `"period":"day"`) ||
		!strings.Contains(string(res.Detail), `"tokens":1000`) {
		t.Fatalf("a run past the default daily quota ended %s (%s) %s, want BUDGET_EXHAUSTED by a day's 1000 tokens", res.TerminalCode, res.Reason, res.Detail)
	}
	resolved := handlerstest.AuditPayloads(t, seen, "budget.resolved")
	if len(resolved) == 1 && resolved[0]["quotas"] == nil {
		t.Fatalf("budget.resolved %v does not record the default quota", resolved)
	}
	dayQuota := orch.Quota{Scope: orch.QuotaTenant, Subject: handlerstest.Tenant, Period: orch.PeriodDay, Tokens: 1000}
	if used, held, err := env.Budgets.QuotaUsed(handlerstest.Ctx(t), handlerstest.Tenant, dayQuota, env.Budgets.Now()); err != nil || used > 1000 || held != 0 {
		t.Fatalf("the default quota's ledger: %g used, %g held (%v)", used, held, err)
	}

	setPolicy(t, env, `{"defaults":{"wall_clock_s":200000},"quotas":{"tenants":{"*":{}}}}`)
	if res, _ := drive("run-no-quota"); res.TerminalCode != orch.CodeSuccess {
		t.Fatalf("a tenant whose policy says no quota ended %s (%s)", res.TerminalCode, res.Reason)
	}
}

// TestQuota_ConcurrentRunsNeverPassTheQuota: sixteen runs lease, draw and
// settle one tenant's daily quota at once, each drawing until it is
// refused: together they use all of it but never more.
func TestQuota_ConcurrentRunsNeverPassTheQuota(t *testing.T) {
	wholeRun(t)
	env, _ := quotaEnv(t)
	ctx := handlerstest.Ctx(t)
	const daily = 20_000
	policy := orch.BudgetPolicy{Quotas: &orch.Quotas{Tenants: map[string]orch.TokenQuota{"*": {DailyTokens: daily}}}}
	quotas := policy.QuotasFor(handlerstest.Tenant, "", "")
	var wg sync.WaitGroup
	errs := make(chan error, 16)
	var used atomic.Int64
	for i := range 16 {
		wg.Go(func() {
			rb := ledger.NewRunBudget(handlerstest.Tenant, fmt.Sprintf("run-c%d", i), orch.DefaultLimits, env.Budgets.Now().Add(time.Hour), quotas)
			lease, err := env.Budgets.OpenLease(ctx, rb)
			var ex *ledger.Exhausted
			if errors.As(err, &ex) {
				return // nothing left when it started
			}
			if err != nil {
				errs <- err
				return
			}
			rb = rb.WithLease(lease)
			for {
				err := env.Budgets.Reserve(ctx, rb, orch.Vector{orch.DimInputTokens: 97})
				if errors.As(err, &ex) {
					break
				}
				if err != nil {
					errs <- err
					return
				}
			}
			s := orch.RunState{Request: orch.RunRequest{TenantID: handlerstest.Tenant, RunID: rb.RunID}}
			s.Budget.Lease, s.Budget.Quotas = lease, quotas
			s.Usage.InputTokens = int(rb.Used()[orch.DimInputTokens])
			used.Add(int64(s.Usage.InputTokens))
			if _, err := env.Budgets.SettleLease(ctx, s); err != nil {
				errs <- err
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	charged, held, err := env.Budgets.QuotaUsed(ctx, handlerstest.Tenant, quotas[0], env.Budgets.Now())
	if err != nil {
		t.Fatal(err)
	}
	if charged != float64(used.Load()) || held != 0 || charged > daily || charged < daily-16*97 {
		t.Fatalf("the quota charged %g and holds %g after runs that used %d: want all they used, at most %d and within a draw a run of it", charged, held, used.Load(), daily)
	}
}

// leasedRun is a run of the test tenant under quotas, an hour from its
// deadline, holding the lease it opened.
func leasedRun(t *testing.T, env *handlerstest.Env, id string, quotas []orch.Quota) orch.RunState {
	t.Helper()
	var run orch.RunState
	run.Request = orch.RunRequest{TenantID: handlerstest.Tenant, RunID: id}
	run.Budget.Limits, run.Budget.Quotas, run.Deadline = orch.DefaultLimits, quotas, env.Budgets.Now().Add(time.Hour)
	lease, err := env.Budgets.OpenLease(handlerstest.Ctx(t), ledger.BudgetOf(run))
	if err != nil || lease == nil {
		t.Fatalf("lease of %s: %+v (%v)", id, lease, err)
	}
	run.Budget.Lease = lease
	return run
}

// TestQuota_GroupMembersHoldLeasesOfTheirOwn: four members of a parallel
// group, over three turns each, draw past their shares of the run's lease
// from leases of their own, raised like the run's: a member's later turns
// adopt its lease instead of adding to it, so what the quota holds stays
// what the members need plus a chunk each; settling the run frees them
// all and charges what the run used.
func TestQuota_GroupMembersHoldLeasesOfTheirOwn(t *testing.T) {
	wholeRun(t)
	env, _ := quotaEnv(t)
	ctx := handlerstest.Ctx(t)
	policy := orch.BudgetPolicy{Quotas: &orch.Quotas{Tenants: map[string]orch.TokenQuota{"*": {DailyTokens: 1_000_000}}}}
	quotas := policy.QuotasFor(handlerstest.Tenant, "", "")
	chunk := ledger.QuotaChunk(quotas[0]) // 31,250
	run := leasedRun(t, env, "run-group", quotas)
	if run.Budget.Lease.Tokens != chunk {
		t.Fatalf("run lease %+v, want a chunk", run.Budget.Lease)
	}
	share := float64(int(chunk) / 4)
	const perTurn = 20_000
	for turn := range 3 {
		for member := range 4 {
			req := orch.StepRequest{Run: run, Step: member + 1, Group: orch.Group{ID: "g1", Expected: 4}}
			req.Usage.InputTokens = turn * perTurn // the member's earlier turns
			if err := env.Budgets.Reserve(ctx, ledger.StepBudget(req), orch.Vector{orch.DimInputTokens: perTurn}); err != nil {
				t.Fatalf("turn %d of member %d: %v", turn+1, member+1, err)
			}
		}
		_, held, err := env.Budgets.QuotaUsed(ctx, handlerstest.Tenant, quotas[0], env.Budgets.Now())
		if err != nil {
			t.Fatal(err)
		}
		// Each member needs what it drew past its share, and holds at most a
		// chunk more.
		need := 4 * (float64((turn+1)*perTurn) - share)
		if held < chunk+need || held > chunk+need+4*chunk {
			t.Fatalf("after turn %d the quota holds %g, want between %g and %g", turn+1, held, chunk+need, chunk+need+4*chunk)
		}
	}
	// After the join the run's hops count its members' draws, and the
	// members' leases with its own: a draw raises the run's lease by what
	// it needs beyond them, not by everything the members drew.
	run.Usage.InputTokens = 4 * 3 * perTurn
	_, before, err := env.Budgets.QuotaUsed(ctx, handlerstest.Tenant, quotas[0], env.Budgets.Now())
	if err != nil {
		t.Fatal(err)
	}
	if err := env.Budgets.Reserve(ctx, ledger.BudgetOf(run), orch.Vector{orch.DimInputTokens: 1000}); err != nil {
		t.Fatal(err)
	}
	if _, after, err := env.Budgets.QuotaUsed(ctx, handlerstest.Tenant, quotas[0], env.Budgets.Now()); err != nil || after > before+1000+chunk {
		t.Fatalf("a draw of 1000 after the join took the quota's holding from %g to %g (%v): at most the draw and a chunk more", before, after, err)
	}
	run.Usage.InputTokens += 1000
	if ok, err := env.Budgets.SettleLease(ctx, run); !ok || err != nil {
		t.Fatalf("settled %v (%v)", ok, err)
	}
	used, held, err := env.Budgets.QuotaUsed(ctx, handlerstest.Tenant, quotas[0], env.Budgets.Now())
	if err != nil || used != 4*3*perTurn+1000 || held != 0 {
		t.Fatalf("after the settlement %g used, %g held (%v), want %d and 0", used, held, err, 4*3*perTurn+1000)
	}
}

// TestQuota_RunIDsNeverNameAnotherRunsLease: run ids are the caller's and
// may hold any character; a run whose id looks like a member's lease of
// another run ("run-a/1") keeps a lease of its own, and settling either
// run leaves the other's alone and charges each what it used.
func TestQuota_RunIDsNeverNameAnotherRunsLease(t *testing.T) {
	wholeRun(t)
	env, _ := quotaEnv(t)
	ctx := handlerstest.Ctx(t)
	policy := orch.BudgetPolicy{Quotas: &orch.Quotas{Tenants: map[string]orch.TokenQuota{"*": {DailyTokens: 1_000_000}}}}
	quotas := policy.QuotasFor(handlerstest.Tenant, "", "")
	chunk := ledger.QuotaChunk(quotas[0])
	held := func() float64 {
		t.Helper()
		_, h, err := env.Budgets.QuotaUsed(ctx, handlerstest.Tenant, quotas[0], env.Budgets.Now())
		if err != nil {
			t.Fatal(err)
		}
		return h
	}
	a := leasedRun(t, env, "run-a", quotas)
	// Member 1 of run-a's group draws past its share: a lease of its own.
	req := orch.StepRequest{Run: a, Step: 1, Group: orch.Group{ID: "g1", Expected: 2}}
	if err := env.Budgets.Reserve(ctx, ledger.StepBudget(req), orch.Vector{orch.DimInputTokens: chunk}); err != nil {
		t.Fatal(err)
	}
	withA := held()
	b := leasedRun(t, env, "run-a/1", quotas)
	if got := held(); got != withA+chunk {
		t.Fatalf("opening run-a/1 took the quota's holding from %g to %g, want a chunk (%g) more: a lease of its own", withA, got, chunk)
	}
	a.Usage.InputTokens = int(chunk)
	if ok, err := env.Budgets.SettleLease(ctx, a); !ok || err != nil {
		t.Fatalf("settling run-a: %v (%v)", ok, err)
	}
	if got := held(); got != chunk {
		t.Fatalf("after run-a settled the quota holds %g, want run-a/1's chunk %g", got, chunk)
	}
	b.Usage.InputTokens = 100
	if ok, err := env.Budgets.SettleLease(ctx, b); !ok || err != nil {
		t.Fatalf("settling run-a/1: %v (%v)", ok, err)
	}
	used, h, err := env.Budgets.QuotaUsed(ctx, handlerstest.Tenant, quotas[0], env.Budgets.Now())
	if err != nil || used != chunk+100 || h != 0 {
		t.Fatalf("after both settled: %g used, %g held (%v), want %g and 0", used, h, err, chunk+100)
	}
}
