package pipeline

import (
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/agentbus/agentbus/events"
	"github.com/agentbus/agentbus/handlers/internal/handlerstest"
	"github.com/agentbus/agentbus/handlers/router"
	"github.com/agentbus/agentbus/handlers/runctl"
	"github.com/agentbus/agentbus/llm"
	"github.com/agentbus/agentbus/llm/llmtest"
	"github.com/agentbus/agentbus/llm/offline"
	"github.com/agentbus/agentbus/orch"
	"github.com/agentbus/agentbus/skills"
	"github.com/agentbus/agentbus/skills/demo"
)

// withModes starts the executor's approval modes on the config bucket,
// after writing overrides there.
func withModes(t *testing.T, env *handlerstest.Env, f *flow, overrides string) {
	t.Helper()
	if _, err := env.Config.Put(handlerstest.Ctx(t), runctl.ConfigKeyApprovalModes, []byte(overrides)); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	f.exec.Modes = runctl.NewApprovalModes(env.Config)
	if err := f.exec.Modes.Start(ctx); err != nil {
		t.Fatal(err)
	}
}

func TestApprovalModes_ATenantOverrideRelaxesOrTightensASkill(t *testing.T) {
	wholeRun(t)
	destructive := &skills.Annotations{ReadOnlyHint: mcp.ToBoolPtr(false), DestructiveHint: mcp.ToBoolPtr(true)}
	t.Run("a destructive skill configured local_write runs", func(t *testing.T) {
		env := handlerstest.NewEnvWith(t, demo.Config{Hints: map[string]*skills.Annotations{demo.SkillOutletList: destructive}})
		f := patternFlow(t, env, calling(t, "active"))
		withModes(t, env, f, `{"`+handlerstest.Tenant+`":{"`+demo.SkillOutletList+`":"local_write"}}`)
		res, seen := f.drive(t, handlerstest.NewEvent(t, "run-relaxed", events.TypeRunRequested, handlerstest.RunRequest("run-relaxed", handlerstest.RankTask)))
		if res.TerminalCode != orch.CodeSuccess {
			t.Fatalf("run ended %s: %s", res.TerminalCode, res.Reason)
		}
		called := handlerstest.AuditPayloads(t, seen, "skill.called")
		if len(called) == 0 || called[0]["approval_mode"] != skills.ModeLocalWrite {
			t.Fatalf("skill.called %v, want approval_mode local_write", called)
		}
		if e := runBudgetOf(t, seen); e.Used[orch.DimSideEffects] != 1 {
			t.Errorf("a local write drew %g side effects, want 1", e.Used[orch.DimSideEffects])
		}
	})
	t.Run("a read-only skill configured destructive for every tenant needs an approval", func(t *testing.T) {
		env := handlerstest.NewEnv(t)
		f := patternFlow(t, env, calling(t, "active"))
		withModes(t, env, f, `{"*":{"`+demo.SkillOutletList+`":"destructive"}}`)
		res, seen := f.drive(t, handlerstest.NewEvent(t, "run-tight", events.TypeRunRequested, handlerstest.RunRequest("run-tight", handlerstest.RankTask)))
		if res.TerminalCode != orch.CodeConfirmRequired {
			t.Fatalf("run ended %s: %s", res.TerminalCode, res.Reason)
		}
		if !slices.Contains(traceNames(seen), "approval.required") || env.Demo.Calls(demo.SkillOutletList) != 0 {
			t.Fatalf("trace %v, %d calls: the skill must not run", traceNames(seen), env.Demo.Calls(demo.SkillOutletList))
		}
	})
}

func TestApprovalModes_FollowTheConfigKey(t *testing.T) {
	wholeRun(t)
	env := handlerstest.NewEnv(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	a := runctl.NewApprovalModes(env.Config)
	if err := a.Start(ctx); err != nil {
		t.Fatal(err)
	}
	m := skills.Manifest{Name: "send_mail"}
	if got := a.Of(handlerstest.Tenant, m); got != skills.ModeNetwork {
		t.Fatalf("without overrides %s, want the skill's own network", got)
	}
	put := func(v string) {
		if _, err := env.Config.Put(handlerstest.Ctx(t), runctl.ConfigKeyApprovalModes, []byte(v)); err != nil {
			t.Fatal(err)
		}
	}
	put(`{"*":{"send_mail":"delegated"},"` + handlerstest.Tenant + `":{"send_mail":"destructive"}}`)
	eventually(t, func() bool {
		return a.Of(handlerstest.Tenant, m) == skills.ModeDestructive && a.Of("acme", m) == skills.ModeDelegated
	})
	put(`{"*":{"send_mail":"approve-everything"}}`) // invalid: the overrides in force stay
	// The watch applies the keys in order: once a later edit of the gates
	// is in, the invalid one has been seen.
	// (local_write, which the default does not gate: the tenant's list
	// replaces the default, so its network calls are not gated then.)
	if _, err := env.Config.Put(handlerstest.Ctx(t), runctl.ConfigKeyApprovalGates, []byte(`{"`+handlerstest.Tenant+`":["local_write"]}`)); err != nil {
		t.Fatal(err)
	}
	eventually(t, func() bool { return a.Gated(handlerstest.Tenant, skills.ModeLocalWrite) })
	if a.Gated(handlerstest.Tenant, skills.ModeNetwork) || !a.Gated("acme", skills.ModeNetwork) {
		t.Fatal("a tenant's list does not replace the default, or it reaches another tenant")
	}
	if got := a.Of(handlerstest.Tenant, m); got != skills.ModeDestructive {
		t.Fatalf("an invalid edit changed the mode to %s", got)
	}
	if _, err := runctl.ParseApprovalModes([]byte(`{"*":{"x":"approve-everything"}}`)); err == nil {
		t.Fatal("an unknown mode parsed")
	}
}

// eventually waits up to 5 s for cond.
func eventually(t *testing.T, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if cond() {
			return
		}
	}
	t.Fatal("the condition did not hold within 5 s")
}

// TestDestructive_PlainMCPToolsNeverRunWithoutApproval: against any MCP
// server (plain mode), a tool annotated destructiveHint and a delete tool
// with no annotation at all are both destructive: chosen by a scripted
// model, neither runs; the run parks at a gate with the approval packet,
// and the tool runs once, only after the approval.
func TestDestructive_PlainMCPToolsNeverRunWithoutApproval(t *testing.T) {
	wholeRun(t)
	var calls sync.Map // tool name -> *atomic.Int32
	count := func(name string) *atomic.Int32 {
		c, _ := calls.LoadOrStore(name, new(atomic.Int32))
		return c.(*atomic.Int32)
	}
	s := server.NewMCPServer("records", "1.0.0", server.WithToolCapabilities(false))
	tool := func(name, desc string, a mcp.ToolAnnotation) {
		s.AddTool(mcp.NewTool(name, mcp.WithDescription(desc), mcp.WithToolAnnotation(a)),
			func(context.Context, mcp.CallToolRequest) (*mcp.CallToolResult, error) {
				count(name).Add(1)
				return mcp.NewToolResultText("done"), nil
			})
	}
	tool("reset_table", "Reset the records table", mcp.ToolAnnotation{ReadOnlyHint: mcp.ToBoolPtr(false), DestructiveHint: mcp.ToBoolPtr(true)})
	tool("delete_record", "Delete one record", mcp.ToolAnnotation{})
	tool("lookup_record", "Look up one record", mcp.ToolAnnotation{ReadOnlyHint: mcp.ToBoolPtr(true)})
	mux := http.NewServeMux()
	mux.Handle("/mcp", server.NewStreamableHTTPServer(s, server.WithStreamableHTTPLogger(slog.New(slog.DiscardHandler))))
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	sk, err := skills.NewClient(skills.Config{URL: srv.URL + "/mcp", Mode: skills.ModePlain})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sk.Close() })

	for _, name := range []string{"reset_table", "delete_record"} {
		t.Run(name, func(t *testing.T) {
			env := handlerstest.NewEnv(t)
			model := llmtest.New()
			model.Default = offline.New()
			model.On(llm.TaskRoute, routeTo("research", router.PatternReact))
			model.On(llm.TaskAct, llmtest.Reply{Response: handlerstest.ToolCallResp("c1", name, `{}`)}, loopAnswer(t, "cleaned up"))
			f := patternFlow(t, env, model)
			f.planner.Skills, f.exec.Skills = sk, sk
			parked, _, seen := f.parkedRun(t, "run-"+name, "Clean up the records: reset, delete or look them up")
			packets := handlerstest.AuditPayloads(t, seen, "approval.required")
			if len(packets) != 1 || packets[0]["action"] != name || packets[0]["risk"] != skills.ModeDestructive {
				t.Fatalf("approval.required %v", packets)
			}
			if a := parked.Gate.Actions; len(a) != 1 || a[0].Action != name {
				t.Fatalf("packet %+v", parked.Gate)
			}
			if n := count(name).Load(); n != 0 {
				t.Fatalf("%s ran %d times without an approval", name, n)
			}
			p := f.decideGate(t, env, parked, orch.GateApproved, "records-owner", "")
			if len(p.finished) != 1 || p.finished[0].TerminalCode != orch.CodeSuccess {
				t.Fatalf("after approval: %+v (trace %v)", p.finished, traceNames(p.seen))
			}
			if n := count(name).Load(); n != 1 {
				t.Fatalf("%s ran %d times after its approval, want once", name, n)
			}
		})
	}
}
