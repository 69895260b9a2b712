package pipeline

import (
	"fmt"
	"strings"
	"testing"

	"github.com/cloudevents/sdk-go/v2/event"

	"github.com/agentbus/agentbus/agents"
	"github.com/agentbus/agentbus/events"
	"github.com/agentbus/agentbus/handlers/internal/handlerstest"
	"github.com/agentbus/agentbus/handlers/runctl"
	"github.com/agentbus/agentbus/llm"
	"github.com/agentbus/agentbus/llm/llmtest"
	"github.com/agentbus/agentbus/llm/openai"
	"github.com/agentbus/agentbus/orch"
)

// The summaries the scripted model writes: the first when run 3's end
// folds the first answer out of the window, the second when run 4's end
// folds turn 2 (given the first as the summary so far).
const (
	firstSummary  = "The user Ada (order ORD-12345) wants the active outlets listed."
	secondSummary = "Ada (order ORD-12345) asked twice for the active outlets; both lists were given."
)

// A session of an agent whose history window keeps 6 messages and
// summarises after 2 turns, on a scripted OpenAI-compatible model served
// over HTTP: the end of the third run folds the first answer out of the
// window, and the model writes its summary (one summarize@v1 call,
// recorded in the run's trace before run.finished, in the run's usage);
// the session keeps the first message verbatim and the model's summary,
// which the fourth run's synthesis request shows; the fourth run's end
// gives the model that summary to fold turn 2 into. Replay re-derives
// both runs. The offline model keeps the extractive summary and is asked
// nothing.
func TestSummary_ARealModelWritesTheSummaryOfTheTurnsLeavingTheWindow(t *testing.T) {
	wholeRun(t)
	chat := llmtest.NewChatServer([]llmtest.Exchange{
		{Task: llm.TaskRoute, Times: -1, Content: `{"task_type":"general","pattern":"plan-then-execute","reason":"a list"}`},
		{Task: llm.TaskSynthesize, Times: -1, Content: "The active outlets are Harbour Front and Central Station."},
		{Task: llm.TaskSummarize, Content: firstSummary, Usage: llmtest.ScriptedUsage{PromptTokens: 70, CompletionTokens: 17}},
		{Task: llm.TaskSummarize, When: firstSummary, Content: secondSummary, Usage: llmtest.ScriptedUsage{PromptTokens: 90, CompletionTokens: 20}},
	})
	t.Cleanup(chat.Close)
	model, err := openai.New(llm.ProviderConfig{Model: "gpt-test", BaseURL: chat.URL, APIKey: "sk-test", MaxRetries: -1})
	if err != nil {
		t.Fatal(err)
	}
	env := handlerstest.NewEnv(t)
	ctx := handlerstest.Ctx(t)
	handlerstest.PutAgent(t, env, "agent-window", func(s *agents.AgentSpec) {
		s.MaxTurns = 0
		s.HistoryWindow = &orch.HistoryWindow{MaxMessages: 6, SummarizeAfter: 2}
	})
	f := newFlow(t, env, env.Store)
	f.router.Model = model
	run := func(i int) (orch.RunResult, []event.Event) {
		t.Helper()
		id := fmt.Sprintf("run-window-%d", i)
		req := handlerstest.RunRequest(id, fmt.Sprintf("List the active outlets (turn %d) for Ada, order ORD-12345", i))
		req.AgentID = "agent-window"
		res, seen := f.drive(t, handlerstest.NewEvent(t, id, events.TypeRunRequested, req))
		if res.TerminalCode != orch.CodeSuccess {
			t.Fatalf("run %d ended %s: %s (unmatched model requests: %v)", i, res.TerminalCode, res.Reason, chat.Unmatched())
		}
		if rep := runctl.ReplayRun(id, seen, runctl.ReplayControls{}); rep.Decisions == 0 || len(rep.Divergences) > 0 {
			t.Fatalf("replay of run %d: %+v", i, rep)
		}
		return res, seen
	}
	summarizeCalls := func(seen []event.Event) []map[string]any {
		var out []map[string]any
		for _, c := range handlerstest.AuditPayloads(t, seen, "model.called") {
			if c["task"] == string(llm.TaskSummarize) {
				out = append(out, c)
			}
		}
		return out
	}
	for i := 1; i <= 2; i++ {
		if _, seen := run(i); len(summarizeCalls(seen)) != 0 {
			t.Fatalf("run %d, inside the window, asked for a summary", i)
		}
	}
	res, seen := run(3)
	calls := summarizeCalls(seen)
	if len(calls) != 1 || calls[0]["prompt_version"] != "summarize@v1" || calls[0]["error"] != nil {
		t.Fatalf("run 3 recorded summarize calls %v", calls)
	}
	summaryAt, endAt := -1, -1
	for i, ev := range seen {
		switch ev.Type() {
		case events.AuditType("run.finished"):
			endAt = i
		case events.AuditType("model.called"):
			if a := handlerstest.Decode[events.Audit](t, ev); strings.Contains(string(a.Payload), `"task":"summarize"`) {
				summaryAt = i
			}
		}
	}
	if summaryAt < 0 || endAt < summaryAt {
		t.Fatalf("run 3's trace has the summary's model.called at %d, run.finished at %d", summaryAt, endAt)
	}
	if res.Usage.InputTokens < 70 || res.Usage.OutputTokens < 17 {
		t.Errorf("run 3's usage %+v leaves out its summary's call", res.Usage)
	}
	sess, _, err := (&runctl.Sessions{KV: env.Sessions}).Get(ctx, handlerstest.Tenant, handlerstest.Session)
	if err != nil {
		t.Fatal(err)
	}
	if m := sess.Messages; len(m) != 6 || !strings.Contains(m[0].Content, "(turn 1)") || m[1].Role != runctl.RoleSummary ||
		m[1].Content != firstSummary || !strings.Contains(m[2].Content, "(turn 2)") {
		t.Fatalf("session after run 3: %+v", m)
	}

	seenBefore := len(chat.Received())
	_, seen = run(4)
	shown := false
	for _, r := range chat.Received()[seenBefore:] {
		if r.Task == llm.TaskSynthesize && strings.Contains(string(r.Raw), firstSummary) {
			shown = true
		}
	}
	if !shown {
		t.Error("run 4's synthesis request does not show the model's summary")
	}
	if calls := summarizeCalls(seen); len(calls) != 1 {
		t.Fatalf("run 4 recorded summarize calls %v", calls)
	}
	sess, _, err = (&runctl.Sessions{KV: env.Sessions}).Get(ctx, handlerstest.Tenant, handlerstest.Session)
	if err != nil {
		t.Fatal(err)
	}
	if m := sess.Messages; !strings.Contains(m[0].Content, "(turn 1)") || m[1].Content != secondSummary ||
		!strings.Contains(m[2].Content, "(turn 3)") {
		t.Fatalf("session after run 4: %+v", m)
	}
	if n := chat.Remaining(); n != 0 {
		t.Errorf("%d scripted summaries were not asked for", n)
	}

	// The offline model: the same session shape, the extractive summary,
	// no summarize call.
	off := handlerstest.NewEnv(t)
	handlerstest.PutAgent(t, off, "agent-window", func(s *agents.AgentSpec) {
		s.MaxTurns = 0
		s.HistoryWindow = &orch.HistoryWindow{MaxMessages: 6, SummarizeAfter: 2}
	})
	f = newFlow(t, off, off.Store)
	for i := 1; i <= 3; i++ {
		if _, seen := run(i); len(summarizeCalls(seen)) != 0 {
			t.Fatalf("the offline run %d asked for a summary", i)
		}
	}
	sess, _, err = (&runctl.Sessions{KV: off.Sessions}).Get(ctx, handlerstest.Tenant, handlerstest.Session)
	if err != nil {
		t.Fatal(err)
	}
	if m := sess.Messages; len(m) != 6 || m[1].Role != runctl.RoleSummary || !strings.HasPrefix(m[1].Content, "assistant: ") {
		t.Fatalf("offline session after run 3: %+v", m)
	}
}
