package pipeline

import (
	"strings"
	"testing"

	"github.com/agentbus/agentbus/events"
	"github.com/agentbus/agentbus/handlers/ingress"
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
		checkPayloadRecord(t, env, keep, calls, tools)
	}
}

// checkPayloadRecord checks the execution record of run-rec: for a tenant
// that keeps payload records, every traced model call's request and
// answer and every tool result, in the trace's order, as the trace keeps
// them, which GET /agent/executions/{id} returns and the list leaves
// out; for one that does not, none.
func checkPayloadRecord(t *testing.T, env *handlerstest.Env, keep bool, calls, tools []map[string]any) {
	t.Helper()
	rec, err := env.Store.GetExecution(handlerstest.Ctx(t), handlerstest.Tenant, "run-rec")
	if err != nil {
		t.Fatal(err)
	}
	if !keep {
		if len(rec.ModelCalls) != 0 || len(rec.ToolResults) != 0 || rec.PayloadsClipped {
			t.Fatalf("not kept: the record has %d model calls, %d tool results", len(rec.ModelCalls), len(rec.ToolResults))
		}
		return
	}
	if len(rec.ModelCalls) != len(calls) || len(rec.ToolResults) != len(tools) || rec.PayloadsClipped {
		t.Fatalf("kept: the record has %d model calls, %d tool results (clipped %v); the trace %d and %d",
			len(rec.ModelCalls), len(rec.ToolResults), rec.PayloadsClipped, len(calls), len(tools))
	}
	for i, c := range rec.ModelCalls {
		if c.Task != calls[i]["task"] || c.Request != calls[i]["request"] || c.Response != calls[i]["response"] {
			t.Errorf("record model call %d %+v; traced %v", i, c, calls[i])
		}
	}
	if rec.ModelCalls[0].Task != "route" || !strings.Contains(rec.ModelCalls[0].Request, "List the active outlets") {
		t.Errorf("the record's first model call %+v", rec.ModelCalls[0])
	}
	for i, r := range rec.ToolResults {
		if r.Name != tools[i]["skill_id"] || r.Result != tools[i]["result"] || r.Arguments != tools[i]["arguments"] {
			t.Errorf("record tool result %d %+v; traced %v", i, r, tools[i])
		}
	}
	srv := handlerstest.NewIngressServer(t, env, ingress.IngressConfig{})
	hdr := map[string]string{"X-Tenant-Id": handlerstest.Tenant}
	one := handlerstest.CheckHTTP(t, srv, handlerstest.HTTPCase{Method: "GET", Path: "/agent/executions/run-rec", Headers: hdr, WantStatus: 200})
	if mc, _ := one["model_calls"].([]any); len(mc) != len(calls) {
		t.Errorf("GET /agent/executions/run-rec has %d model calls", len(mc))
	}
	list := handlerstest.CheckHTTP(t, srv, handlerstest.HTTPCase{Method: "GET", Path: "/agent/executions", Headers: hdr, WantStatus: 200})
	if l, _ := list["executions"].([]any); len(l) != 1 || l[0].(map[string]any)["model_calls"] != nil || l[0].(map[string]any)["tool_results"] != nil {
		t.Errorf("the list %v", list)
	}
}
