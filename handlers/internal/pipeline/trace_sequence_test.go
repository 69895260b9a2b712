package pipeline

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/agentbus/agentbus/handlers"
	"github.com/agentbus/agentbus/handlers/internal/handlerstest"
	"github.com/agentbus/agentbus/orch"
	"github.com/agentbus/agentbus/skills/demo"
	"github.com/agentbus/agentbus/store"
)

// TestTrace_TheExactEventSequenceOfARunWithOneReplan (seed 000 §10, Layer
// 1): a run whose first skill call hangs past its timeout fails its first
// step, replans once and completes. Its trace, read back from the store by
// plan, is exactly this sequence: routing, planning, the plan persisted at
// each change of status, the failed step, the replan with its revised
// plan, the two steps of the revised plan (skill call, model turns,
// memory write, the subagent's finish), the synthesis and the end.
func TestTrace_TheExactEventSequenceOfARunWithOneReplan(t *testing.T) {
	wholeRun(t)
	env := handlerstest.NewEnvWith(t, demo.Config{HangFirst: map[string]int{demo.SkillOutletList: 1}})
	f := newFlow(t, env, env.Store)
	f.exec.SkillTimeout = 300 * time.Millisecond
	res, _ := f.drive(t, runStart(t, "run-trace-replan", handlerstest.RankTask))
	if res.TerminalCode != orch.CodeSuccess {
		t.Fatalf("the run ended %s: %s", res.TerminalCode, res.Reason)
	}
	evs, err := env.Store.Trace(handlerstest.Ctx(t), store.TraceQuery{TenantID: handlerstest.Tenant, PlanID: res.PlanID})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	var statuses []string
	for _, ev := range evs {
		got = append(got, ev.EventType)
		if ev.EventType == handlers.AuditPlanPersisted {
			statuses = append(statuses, string(ev.Payload))
		}
	}
	want := []string{
		"user_message.received", "model.called", "budget.resolved", "routing.decided", "subagent_a.spawned", "plan.persisted",
		"model.called", "plan.proposed", "critic.plan_verified", "plan.received", "step_1.started", "plan.persisted",
		"skill.timeout", "model.called", "subagent.finish", "step_1.failed", "critic.verdict",
		"replan.triggered", "subagent_a.spawned", "plan.persisted",
		"model.called", "plan.proposed", "critic.plan_verified", "plan.revised", "step_3.started", "plan.persisted",
		"skill.called", "model.called", "memory.written", "model.called", "subagent.finish", "step_3.complete", "critic.verdict",
		"step_4.started", "skill.called", "model.called", "memory.written", "model.called", "subagent.finish", "step_4.complete", "critic.verdict",
		"synthesis.started", "model.called", "session.updated", "plan.persisted", "run.finished",
	}
	if !slices.Equal(got, want) {
		t.Fatalf("trace:\n%s\nwant:\n%s", strings.Join(got, " "), strings.Join(want, " "))
	}
	for i, status := range []string{orch.PlanPlanning, orch.PlanExecuting, orch.PlanReplanning, orch.PlanExecuting, orch.PlanComplete} {
		if i >= len(statuses) || !strings.Contains(statuses[i], `"status":"`+status+`"`) {
			t.Errorf("plan.persisted %d: %v, want status %s", i, statuses, status)
		}
	}
}
