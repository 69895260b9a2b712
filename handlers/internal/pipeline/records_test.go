package pipeline

import (
	"strings"
	"testing"

	"github.com/agentbus/agentbus/events"
	"github.com/agentbus/agentbus/handlers/internal/handlerstest"
	"github.com/agentbus/agentbus/handlers/runctl"
	"github.com/agentbus/agentbus/orch"
)

// Payload records (issue 37): a tenant that keeps them has every model
// call's request and answer in its model.called events and every tool
// call's arguments and result in its skill.called events; a tenant that
// does not (the default) has counts, sizes and hashes only.
func TestRecords_ATenantThatKeepsPayloadsHasThemInItsTrace(t *testing.T) {
	wholeRun(t)
	for _, keep := range []bool{true, false} {
		env := handlerstest.NewEnv(t)
		ctx := handlerstest.Ctx(t)
		if keep {
			if _, err := runctl.SetTenantChoice(ctx, env.Config, runctl.ConfigKeyPayloadRecords, handlerstest.Tenant, runctl.RecordsKeep); err != nil {
				t.Fatal(err)
			}
		}
		policy := runctl.NewRecordPolicy(env.Config)
		if err := policy.Start(ctx); err != nil {
			t.Fatal(err)
		}
		f := newFlow(t, env, env.Store)
		f.router.Records, f.planner.Records, f.exec.Records = policy, policy, policy
		res, seen := f.drive(t, runStart(t, "run-rec", "List the active outlets"))
		if res.TerminalCode != orch.CodeSuccess {
			t.Fatalf("run ended %s: %s", res.TerminalCode, res.Reason)
		}
		calls := handlerstest.AuditPayloads(t, seen, "model.called")
		tools := handlerstest.AuditPayloads(t, seen, "skill.called")
		if len(calls) < 3 || len(tools) == 0 {
			t.Fatalf("%d model calls, %d tool calls traced", len(calls), len(tools))
		}
		for _, c := range calls {
			req, _ := c["request"].(string)
			resp, _ := c["response"].(string)
			switch {
			case keep && (req == "" || resp == ""):
				t.Errorf("kept: a %v call has request %q and answer %q", c["task"], req, resp)
			case !keep && (req != "" || resp != ""):
				t.Errorf("not kept: a %v call has its payloads", c["task"])
			}
			if keep && c["task"] == "route" && !strings.Contains(req, "List the active outlets") {
				t.Errorf("the routing call's request %q does not hold the task", req)
			}
		}
		for _, c := range tools {
			result, _ := c["result"].(string)
			if keep != (result != "") || keep && !strings.Contains(result, "outlet") {
				t.Errorf("keep=%v: skill.called %v has result %q", keep, c["skill_id"], result)
			}
		}
		if n := len(handlerstest.OfType(seen, events.TypeRunFinished)); n != 1 {
			t.Fatalf("%d run.finished", n)
		}
	}
}
