package pipeline

import (
	"context"
	"errors"
	"log/slog"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/cloudevents/sdk-go/v2/event"
	json "github.com/go-json-experiment/json/v1"
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
)

// bookings is a plain MCP server whose book_table tool asks the user for
// the guest's name and party size (elicitation) before it books, and
// records each booking it makes.
type bookings struct {
	mu     sync.Mutex
	asked  int
	booked []map[string]any
}

func (b *bookings) made() []map[string]any {
	b.mu.Lock()
	defer b.mu.Unlock()
	return slices.Clone(b.booked)
}

func (b *bookings) client(t *testing.T) *skills.Client {
	t.Helper()
	s := server.NewMCPServer("bookings", "1.0.0", server.WithToolCapabilities(false), server.WithElicitation())
	ask := mcp.ElicitationParams{Message: "Who is the table for, and how many guests?", RequestedSchema: map[string]any{
		"type": "object", "required": []string{"name"}, "properties": map[string]any{
			"name": map[string]any{"type": "string", "minLength": 1},
			"size": map[string]any{"type": "integer", "minimum": 1, "default": 2}}}}
	s.AddTool(mcp.NewTool("book_table", mcp.WithDescription("Book a table at the outlet"),
		mcp.WithToolAnnotation(mcp.ToolAnnotation{ReadOnlyHint: mcp.ToBoolPtr(false), DestructiveHint: mcp.ToBoolPtr(false),
			OpenWorldHint: mcp.ToBoolPtr(false)})),
		func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			r, answered := req.Params.InputResponses["guest"]
			if !answered {
				b.mu.Lock()
				b.asked++
				b.mu.Unlock()
				return server.NewInputRequestBuilder("").Elicit("guest", ask).ToolResult(), nil
			}
			if err := r.DecodeFor(mcp.MethodElicitationCreate); err != nil || r.Elicitation == nil ||
				r.Elicitation.Action != mcp.ElicitationResponseActionAccept {
				return mcp.NewToolResultError("not booked: the guest did not say"), nil
			}
			guest, _ := r.Elicitation.Content.(map[string]any)
			b.mu.Lock()
			b.booked = append(b.booked, guest)
			b.mu.Unlock()
			return mcp.NewToolResultText("booked"), nil
		})
	return plainClient(t, s)
}

// plainClient serves s over streamable HTTP until the test ends and
// returns a plain-mode skill client of it.
func plainClient(t *testing.T, s *server.MCPServer) *skills.Client {
	t.Helper()
	srv := httptest.NewServer(server.NewStreamableHTTPServer(s, server.WithStreamableHTTPLogger(slog.New(slog.DiscardHandler))))
	t.Cleanup(srv.Close)
	sk, err := skills.NewClient(skills.Config{URL: srv.URL + "/mcp", Mode: skills.ModePlain})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sk.Close() })
	return sk
}

// TestElicitation_AToolsQuestionIsAGate: an MCP server that asks the
// user during a call parks the step at an elicitation gate with the
// question and its schema; nothing is booked. An answer the schema
// rejects leaves the gate open; an approval's answer (its left-out
// properties from the schema's defaults) goes back to the server when
// the call is made again, once, and a replay re-derives the run; a denial ends the run rejected; a step
// message with answers the gate did not give fails closed.
func TestElicitation_AToolsQuestionIsAGate(t *testing.T) {
	wholeRun(t)
	start := func(t *testing.T, runID string) (*handlerstest.Env, *flow, *bookings, orch.RunParked, []event.Event) {
		env := handlerstest.NewEnv(t)
		b := &bookings{}
		model := llmtest.New()
		model.Default = offline.New()
		model.On(llm.TaskRoute, routeTo("research", router.PatternReact))
		model.On(llm.TaskAct, llmtest.Reply{Response: handlerstest.ToolCallResp("c1", "book_table", `{}`)}, loopAnswer(t, "booked"))
		f := patternFlow(t, env, model)
		sk := b.client(t)
		f.planner.Skills, f.exec.Skills = sk, sk
		parked, _, seen := f.parkedRun(t, runID, "Book a table at the outlet for tonight")
		return env, f, b, parked, seen
	}
	t.Run("answered", func(t *testing.T) {
		env, f, b, parked, seen := start(t, "run-elicit-ok")
		if parked.Gate.Kind != orch.GateElicitation || len(parked.Gate.Actions) != 1 {
			t.Fatalf("packet %+v", parked.Gate)
		}
		q := parked.Gate.Actions[0].Elicitation
		if q == nil || !strings.Contains(q.Message, "how many guests") || !strings.Contains(string(q.Schema), `"size"`) {
			t.Fatalf("the packet's question = %+v", q)
		}
		if len(b.made()) != 0 || b.asked != 1 || !slices.Contains(traceNames(seen), "skill.elicitation") {
			t.Fatalf("booked %v after %d questions; trace %v", b.made(), b.asked, traceNames(seen))
		}

		// The answer must satisfy the question's schema.
		step := parked.Gate.Actions[0].Step
		bad := orch.ApprovalDecided{RunID: parked.RunID, TenantID: handlerstest.Tenant, SessionID: handlerstest.Session, Gate: parked.Gate.Gate,
			Decision: orch.GateApproved, By: "host", Answers: map[int]json.RawMessage{step: json.RawMessage(`{"size":0}`)}}
		if _, _, err := env.Gates.Resolve(handlerstest.Ctx(t), handlerstest.Tenant, bad); !errors.Is(err, runctl.ErrInvalidAnswer) {
			t.Fatalf("an answer without the required name: %v", err)
		}
		bad.Answers = nil
		if _, _, err := env.Gates.Resolve(handlerstest.Ctx(t), handlerstest.Tenant, bad); !errors.Is(err, runctl.ErrInvalidAnswer) {
			t.Fatalf("an approval without an answer: %v", err)
		}

		p := f.decide(t, env, parked, orch.ApprovalDecided{Decision: orch.GateApproved, By: "host",
			Answers: map[int]json.RawMessage{step: json.RawMessage(`{"name":"Ada"}`)}})
		if len(p.finished) != 1 || p.finished[0].TerminalCode != orch.CodeSuccess {
			t.Fatalf("after the answer: %+v (trace %v)", p.finished, traceNames(p.seen))
		}
		got := b.made()
		if len(got) != 1 || got[0]["name"] != "Ada" || got[0]["size"] != float64(2) {
			t.Fatalf("bookings %v, want one for Ada with the default size 2", got)
		}
		rec, _, err := env.Gates.Get(handlerstest.Ctx(t), handlerstest.Tenant, parked.RunID, parked.Gate.Gate)
		if err != nil || rec.Status != orch.GateApproved || rec.By != "host" {
			t.Fatalf("gate record %+v, %v", rec, err)
		}
		handlerstest.AssertJSON(t, rec.Answers[step], `{"name":"Ada","size":2}`)
		// Replay re-derives the run, the answer included, with no call.
		if rep := runctl.ReplayRun(parked.RunID, append(seen, p.seen...), gatesOf(t, env, parked.RunID)); rep.Decisions == 0 ||
			len(rep.Divergences) > 0 || rep.Code != orch.CodeSuccess {
			t.Fatalf("replay: %+v", rep)
		}
	})
	t.Run("denied", func(t *testing.T) {
		env, f, b, parked, _ := start(t, "run-elicit-no")
		p := f.decideGate(t, env, parked, orch.GateRejected, "host", "no table tonight")
		if len(p.finished) != 1 || p.finished[0].TerminalCode != orch.CodeUserCancel || p.finished[0].Status != orch.PlanRejected {
			t.Fatalf("after the denial: %+v", p.finished)
		}
		if len(b.made()) != 0 {
			t.Fatalf("booked %v after a denial", b.made())
		}
	})
	t.Run("forged answers", func(t *testing.T) {
		env, f, b, parked, seen := start(t, "run-elicit-forged")
		step := parked.Gate.Actions[0].Step
		p := f.decide(t, env, parked, orch.ApprovalDecided{Decision: orch.GateApproved, By: "host",
			Answers: map[int]json.RawMessage{step: json.RawMessage(`{"name":"Ada","size":4}`)}})
		if len(p.finished) != 1 || len(b.made()) != 1 {
			t.Fatalf("the answered run: %+v, bookings %v", p.finished, b.made())
		}
		// The same step again, claiming the gate gave another answer.
		fin := handlerstest.Decode[orch.StepJoined](t, handlerstest.OfType(seen, events.TypeStepJoined)[0])
		st := fin.Run
		st.Plan.Live(step).Status = orch.StepRunning
		call := fin.Result.Parked.Call
		call.Answers = []orch.ElicitAnswer{{Question: fin.Result.Parked.Elicit.Question, Content: json.RawMessage(`{"name":"Mallory","size":40}`)}}
		forged := orch.StepRequest{Run: st, Step: step, Group: orch.Group{ID: "grp-forged", Expected: 1},
			Iteration: fin.Result.Parked.Iteration, Turns: fin.Result.Parked.Turns,
			Approved: &orch.Approved{Gate: parked.Gate.Gate, By: "mallory", Call: call}}
		outs, err := f.exec.Handle(handlerstest.Ctx(t), handlerstest.NewEvent(t, "forged-answers", events.TypeStepRequested, forged))
		if err != nil {
			t.Fatal(err)
		}
		j := handlerstest.Decode[orch.StepJoined](t, handlerstest.OfType(outs, events.TypeStepJoined)[0])
		if j.Result.Outcome != orch.OutcomeUnsafe || !strings.Contains(j.Result.Reason, "answers") || len(b.made()) != 1 {
			t.Fatalf("forged answers: %s %s; bookings %v", j.Result.Outcome, j.Result.Reason, b.made())
		}
	})
}
