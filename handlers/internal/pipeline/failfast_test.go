package pipeline

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	json "github.com/go-json-experiment/json/v1"
	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/agentbus/agentbus/events"
	"github.com/agentbus/agentbus/handlers/internal/handlerstest"
	"github.com/agentbus/agentbus/handlers/router"
	"github.com/agentbus/agentbus/llm"
	"github.com/agentbus/agentbus/llm/llmtest"
	"github.com/agentbus/agentbus/llm/offline"
	"github.com/agentbus/agentbus/orch"
	"github.com/agentbus/agentbus/sandbox"
	"github.com/agentbus/agentbus/skills"
	"github.com/agentbus/agentbus/skills/demo"
)

// Deterministic failures fail fast: an error a retry cannot change ends
// its step (or its run) on the message's first delivery, with its reason,
// and the decider replans or ends the run with a clear code. Each class
// runs a whole run through the roles served as workers on a real
// JetStream (served), where a transient error would be redelivered by the
// broker (4 deliveries in the test topology) and then dead-lettered; each
// asserts that every message reached its handler once and that the run
// ended with its code within seconds. Only the model is scripted.

// quickly bounds a run that fails fast: far below the redeliveries and
// backoff a transient error would cost.
const quickly = 10 * time.Second

func TestFailFast_DeterministicErrorsEndTheirStepOnTheFirstDelivery(t *testing.T) {
	t.Run("a return_spec the called skill's output cannot give", func(t *testing.T) {
		// The step may call outlet_list or acme_loyalty_report; its
		// return_spec (outlet ids) is outlet_list's, but the model calls
		// the loyalty report. Its response goes the large-response way,
		// and the offline model cannot derive the return_spec from the
		// report's output schema: "shape not derivable".
		env := handlerstest.NewEnv(t)
		model := routedTo("general", router.PatternPlanThenExecute)
		model.Repeat = true
		for i := 1; i <= 2; i++ {
			model.On(llm.TaskPlan, llmtest.Text(fmt.Sprintf(`{"steps":[{"step":%d,"task":"List the open outlets","skills":[%q,%q],`+
				`"return_spec":{"shape":%s}}]}`, i, demo.SkillOutletList, demo.SkillAcmeLoyaltyReport, handlerstest.OutletIDsShape)))
		}
		model.On(llm.TaskAct, llmtest.ToolCall("c1", demo.SkillAcmeLoyaltyReport, `{}`))
		f := patternFlow(t, env, model)
		f.exec.LargeResponse, f.exec.Sandbox = 16, newSandbox(t)
		s := serve(t, env, f)
		res := s.run(t, env, "acme", "run-ff-derive", "Which outlets are open, by the loyalty report?", quickly)
		if res.TerminalCode != orch.CodeRepeatedFailure || !strings.Contains(res.Reason, "failed the same way") ||
			!strings.Contains(res.Reason, "shape not derivable") {
			t.Fatalf("run ended %s: %s; want REPEATED_FAILURE, the replan failing the same way on the extraction", res.TerminalCode, res.Reason)
		}
		s.assertEachDeliveredOnce(t)
		if n := s.deliveries(events.TypeStepRequested); len(n) != 2 {
			t.Errorf("step.requested deliveries %v, want the step and its revision, once each", n)
		}
		assertStepFailed(t, s, orch.OutcomeFailed, "cannot extract the return_spec")
	})

	t.Run("a plan that stays invalid after its repairs", func(t *testing.T) {
		env := handlerstest.NewEnv(t)
		model := routedTo("general", router.PatternPlanThenExecute)
		model.Repeat = true
		model.On(llm.TaskPlan, llmtest.Text(`here is my plan: call outlet_list`))
		s := serve(t, env, patternFlow(t, env, model))
		res := s.run(t, env, handlerstest.Tenant, "run-ff-plan", handlerstest.RankTask, quickly)
		if res.TerminalCode != orch.CodeValidationFail || !strings.Contains(res.Reason, "invalid structured output") {
			t.Fatalf("run ended %s: %s; want VALIDATION_FAIL", res.TerminalCode, res.Reason)
		}
		s.assertEachDeliveredOnce(t)
		if n := s.deliveries(events.TypePlanRequested); len(n) != 1 {
			t.Errorf("plan.requested deliveries %v, want one, once", n)
		}
	})

	t.Run("tool arguments that stay invalid against the input schema", func(t *testing.T) {
		env := handlerstest.NewEnv(t)
		model := routedTo("general", router.PatternPlanThenExecute)
		model.Repeat = true
		model.On(llm.TaskAct, llmtest.ToolCall("c1", demo.SkillOutletList, `{"status":"open"}`)) // not in the enum
		s := serve(t, env, patternFlow(t, env, model))
		res := s.run(t, env, handlerstest.Tenant, "run-ff-args", handlerstest.RankTask, quickly)
		if res.TerminalCode != orch.CodeValidationFail || !strings.Contains(res.Reason, "tool arguments stayed invalid") {
			t.Fatalf("run ended %s: %s; want VALIDATION_FAIL", res.TerminalCode, res.Reason)
		}
		s.assertEachDeliveredOnce(t)
		if got := len(s.audits(t, "skill.arguments_invalid")); got != 3 || env.Demo.Calls(demo.SkillOutletList) != 0 {
			t.Errorf("%d skill.arguments_invalid, %d calls: want the 3 attempts refused before any call", got, env.Demo.Calls(demo.SkillOutletList))
		}
	})

	t.Run("a required argument the skill's server rejects", func(t *testing.T) {
		// The tool's schema does not say id is required; its server does,
		// with JSON-RPC invalid params. The model sees the rejection; its
		// identical calls end in the loop guard, never in redeliveries.
		env := handlerstest.NewEnv(t)
		sk := recordsServer(t, nil)
		model := llmtest.New()
		model.Default, model.Repeat = offline.New(), true
		model.On(llm.TaskRoute, routeTo("research", router.PatternReact))
		model.On(llm.TaskAct, llmtest.ToolCall("c1", "lookup_record", `{}`))
		f := patternFlow(t, env, model)
		f.planner.Skills, f.exec.Skills = sk, sk
		s := serve(t, env, f)
		res := s.run(t, env, handlerstest.Tenant, "run-ff-server-args", "Look up the record r-1", quickly)
		if res.TerminalCode != orch.CodeRepeatedFailure || !strings.Contains(res.Reason, "loop guard") {
			t.Fatalf("run ended %s: %s; want REPEATED_FAILURE from the loop guard", res.TerminalCode, res.Reason)
		}
		s.assertEachDeliveredOnce(t)
		called := s.audits(t, "skill.called")
		if len(called) == 0 || called[0]["is_error"] != true {
			t.Fatalf("skill.called %v, want the rejected call as an error result", called)
		}
		if !modelSaw(model, "skills: invalid arguments") {
			t.Error("the model never saw the server's rejection of the arguments")
		}
	})

	t.Run("a result that breaks the tool's declared output schema", func(t *testing.T) {
		env := handlerstest.NewEnv(t)
		sk := recordsServer(t, nil)
		model := llmtest.New()
		model.Default, model.Repeat = offline.New(), true
		model.On(llm.TaskRoute, routeTo("research", router.PatternReact))
		model.On(llm.TaskAct, llmtest.ToolCall("c1", "record_status", `{"id":"r-1"}`))
		f := patternFlow(t, env, model)
		f.planner.Skills, f.exec.Skills = sk, sk
		s := serve(t, env, f)
		res := s.run(t, env, handlerstest.Tenant, "run-ff-contract", "Look up the status of record r-1", quickly)
		if res.TerminalCode != orch.CodeRepeatedFailure || !strings.Contains(res.Reason, "failed the same way") {
			t.Fatalf("run ended %s: %s; want REPEATED_FAILURE, the replan failing the same way", res.TerminalCode, res.Reason)
		}
		s.assertEachDeliveredOnce(t)
		assertStepFailed(t, s, orch.OutcomeFailed, "breaks the tool's output schema")
	})

	t.Run("a skill outside the step's allowed skills", func(t *testing.T) {
		env := handlerstest.NewEnv(t)
		model := routedTo("general", router.PatternPlanThenExecute)
		model.Repeat = true
		model.On(llm.TaskAct, llmtest.ToolCall("c1", demo.SkillMenuCatalog, `{}`))
		s := serve(t, env, patternFlow(t, env, model))
		res := s.run(t, env, handlerstest.Tenant, "run-ff-denied", "List the active outlets", quickly)
		if res.TerminalCode != orch.CodePermissionDenied {
			t.Fatalf("run ended %s: %s; want PERMISSION_DENIED", res.TerminalCode, res.Reason)
		}
		s.assertEachDeliveredOnce(t)
		if env.Demo.Calls(demo.SkillMenuCatalog) != 0 {
			t.Error("the skill outside allowed_skills was called")
		}
	})

	t.Run("a skill the server does not know", func(t *testing.T) {
		// Discovered, then gone: the server answers the call "tool not
		// found". The model sees it; its repeated calls end in the guard.
		env := handlerstest.NewEnv(t)
		gone := &atomic.Bool{}
		sk := recordsServer(t, gone)
		model := llmtest.New()
		model.Default, model.Repeat = offline.New(), true
		model.On(llm.TaskRoute, routeTo("research", router.PatternReact))
		model.On(llm.TaskAct, llmtest.ToolCall("c1", "lookup_record", `{"id":"r-1"}`))
		f := patternFlow(t, env, model)
		f.planner.Skills, f.exec.Skills = sk, sk
		s := serve(t, env, f)
		gone.Store(true)
		res := s.run(t, env, handlerstest.Tenant, "run-ff-unknown", "Look up the record r-1", quickly)
		if res.TerminalCode != orch.CodeRepeatedFailure {
			t.Fatalf("run ended %s: %s; want REPEATED_FAILURE", res.TerminalCode, res.Reason)
		}
		s.assertEachDeliveredOnce(t)
		if !modelSaw(model, "skills: skill not found") {
			t.Error("the model never saw that the skill is gone")
		}
	})
}

// TestFailFast_TransientErrorsAreStillRetried: a model call whose
// connection broke, and a skill server that is unavailable and comes
// back, are redelivered, and the run succeeds.
func TestFailFast_TransientErrorsAreStillRetried(t *testing.T) {
	t.Run("a model call whose connection broke", func(t *testing.T) {
		env := handlerstest.NewEnv(t)
		model := llmtest.New()
		model.Default = offline.New()
		model.On(llm.TaskAct, llmtest.Reply{Err: errors.New("openai: read tcp 10.0.0.1:443: connection reset by peer")})
		s := serve(t, env, patternFlow(t, env, model))
		res := s.run(t, env, handlerstest.Tenant, "run-ff-model-reset", handlerstest.RankTask, quickly)
		if res.TerminalCode != orch.CodeSuccess {
			t.Fatalf("run ended %s: %s; want SUCCESS after the redelivery", res.TerminalCode, res.Reason)
		}
		if n := s.ended(events.TypeStepRequested, events.Retried); n != 1 {
			t.Errorf("%d step.requested deliveries retried, want 1", n)
		}
	})

	t.Run("a skill server that is unavailable, then back", func(t *testing.T) {
		env := handlerstest.NewEnv(t)
		var refused atomic.Int32
		flaky := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if isToolCall(r) && refused.Add(1) <= 2 { // the client retries once on a fresh session
				http.Error(w, "upstream unavailable", http.StatusServiceUnavailable)
				return
			}
			env.Demo.Handler().ServeHTTP(w, r)
		})
		sk := skillsClient(t, flaky, "/tenants/{tenant}/mcp", skills.ModeSkillService)
		f := newFlow(t, env, env.Store)
		f.exec.Skills = sk
		s := serve(t, env, f)
		res := s.run(t, env, handlerstest.Tenant, "run-ff-skill-503", handlerstest.RankTask, quickly)
		if res.TerminalCode != orch.CodeSuccess {
			t.Fatalf("run ended %s: %s; want SUCCESS after the redelivery", res.TerminalCode, res.Reason)
		}
		if n := s.ended(events.TypeStepRequested, events.Retried); n != 1 {
			t.Errorf("%d step.requested deliveries retried, want 1", n)
		}
	})
}

// assertStepFailed asserts that the first step ended with outcome and a
// reason holding reason.
func assertStepFailed(t *testing.T, s *served, outcome, reason string) {
	t.Helper()
	fin := s.audits(t, "subagent.finish")
	if len(fin) == 0 || fin[0]["status"] != outcome || !strings.Contains(fmt.Sprint(fin[0]["reason"]), reason) {
		t.Fatalf("subagent.finish %v, want the first step %s with %q", fin, outcome, reason)
	}
}

// modelSaw reports whether a request to model carried a message holding
// s.
func modelSaw(model *llmtest.Scripted, s string) bool {
	for _, req := range model.Requests() {
		for _, m := range req.Messages {
			if strings.Contains(m.Content, s) {
				return true
			}
		}
	}
	return false
}

// recordsServer is a plain MCP server with two tools: lookup_record, whose
// schema leaves id optional while the server requires it (a call without
// one is answered JSON-RPC invalid params, as servers built on the
// TypeScript SDK answer), and record_status, which declares an output
// schema and answers plain text. Once gone is set, the server answers
// every call that the tool is not found.
func recordsServer(t *testing.T, gone *atomic.Bool) *skills.Client {
	t.Helper()
	s := server.NewMCPServer("records", "1.0.0", server.WithToolCapabilities(false))
	s.AddTool(mcp.NewTool("lookup_record", mcp.WithDescription("Look up one record by its id"),
		mcp.WithString("id", mcp.Description("The record's id")), mcp.WithToolAnnotation(mcp.ToolAnnotation{ReadOnlyHint: mcp.ToBoolPtr(true)})),
		func(context.Context, mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return mcp.NewToolResultText(`record r-1: open`), nil
		})
	s.AddTool(mcp.NewTool("record_status", mcp.WithDescription("Look up the status of one record by its id"),
		mcp.WithString("id", mcp.Description("The record's id")),
		mcp.WithRawOutputSchema([]byte(`{"type":"object","properties":{"status":{"type":"string"}},"required":["status"]}`)), // encoding/json's RawMessage
		mcp.WithToolAnnotation(mcp.ToolAnnotation{ReadOnlyHint: mcp.ToBoolPtr(true)})),
		func(context.Context, mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return mcp.NewToolResultText("open"), nil // not the JSON object its schema declares
		})
	mcpHandler := server.NewStreamableHTTPServer(s, server.WithStreamableHTTPLogger(slog.New(slog.DiscardHandler)))
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var call struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
			Params struct {
				Arguments map[string]any `json:"arguments"`
			} `json:"params"`
		}
		body := readBody(r)
		if json.Unmarshal(body, &call) == nil && call.Method == "tools/call" {
			msg := ""
			switch {
			case gone != nil && gone.Load():
				msg = "Tool lookup_record not found"
			case call.Params.Arguments["id"] == nil:
				msg = "Invalid arguments for tool lookup_record: id: Required"
			}
			if msg != "" {
				w.Header().Set("Content-Type", "application/json")
				fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"error":{"code":%d,"message":%q}}`, call.ID, mcp.INVALID_PARAMS, msg)
				return
			}
		}
		mcpHandler.ServeHTTP(w, r)
	})
	return skillsClient(t, h, "/mcp", skills.ModePlain)
}

// skillsClient is a skills client of h served over HTTP at path.
func skillsClient(t *testing.T, h http.Handler, path, mode string) *skills.Client {
	t.Helper()
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	sk, err := skills.NewClient(skills.Config{URL: srv.URL + path, Mode: mode})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sk.Close() })
	return sk
}

// readBody reads r's body and puts it back for the next handler.
func readBody(r *http.Request) []byte {
	if r.Body == nil {
		return nil
	}
	b, _ := io.ReadAll(r.Body)
	r.Body = io.NopCloser(bytes.NewReader(b))
	return b
}

// isToolCall reports whether r is a JSON-RPC tools/call request.
func isToolCall(r *http.Request) bool {
	return bytes.Contains(readBody(r), []byte(`"tools/call"`))
}

// newSandbox is a sandbox on a fresh root the scripts' unprivileged uid
// can reach (t.TempDir's parents are private).
func newSandbox(t *testing.T) *sandbox.Sandbox {
	t.Helper()
	root, err := os.MkdirTemp("", "agentbus-sandbox-test-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(root) })
	if err := os.Chmod(root, 0o711); err != nil {
		t.Fatal(err)
	}
	sb, err := sandbox.New(sandbox.Config{Root: root})
	if err != nil {
		t.Fatalf("sandbox: %v (run deploy/sandbox/setup.sh)", err)
	}
	return sb
}
