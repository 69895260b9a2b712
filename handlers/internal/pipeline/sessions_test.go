package pipeline

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cloudevents/sdk-go/v2/event"
	json "github.com/go-json-experiment/json/v1"

	"github.com/agentbus/agentbus/events"
	"github.com/agentbus/agentbus/handlers/internal/handlerstest"
	"github.com/agentbus/agentbus/handlers/memory"
	"github.com/agentbus/agentbus/handlers/projector"
	"github.com/agentbus/agentbus/handlers/runctl"
	"github.com/agentbus/agentbus/llm"
	"github.com/agentbus/agentbus/orch"
	"github.com/agentbus/agentbus/store"
)

// TestSessionHistory: the second run of a session sees the first run's
// message and answer in its history, the planner and the synthesiser get
// it, and over 50 runs the history (and so the largest message of a run)
// stays bounded, the older turns condensed into a summary.
func TestSessionHistory(t *testing.T) {
	wholeRun(t)
	env := handlerstest.NewEnv(t)
	f := newFlow(t, env, env.Store)
	ctx := handlerstest.Ctx(t)
	run := func(i int) (orch.RunResult, []event.Event) {
		t.Helper()
		runID := fmt.Sprintf("run-sess-%02d", i)
		// A long message, so an unbounded history would show at once.
		msg := fmt.Sprintf("%s (turn %d) %s", handlerstest.RankTask, i, strings.Repeat("with every detail ", 40))
		res, seen := f.drive(t, handlerstest.NewEvent(t, runID, events.TypeRunRequested, handlerstest.RunRequest(runID, msg)))
		if res.TerminalCode != orch.CodeSuccess {
			t.Fatalf("run %d ended %s: %s", i, res.TerminalCode, res.Reason)
		}
		return res, seen
	}
	largest := func(seen []event.Event) int {
		n := 0
		for _, ev := range seen {
			if !strings.HasPrefix(ev.Type(), events.TypeAuditPrefix) {
				n = max(n, len(ev.Data()))
			}
		}
		return n
	}
	historyOf := func(seen []event.Event) []llm.HistoryMessage {
		t.Helper()
		i := slices.IndexFunc(seen, func(ev event.Event) bool { return ev.Type() == events.TypePlanRequested })
		if i < 0 {
			t.Fatal("no plan.requested")
		}
		return handlerstest.Decode[orch.PlanRequest](t, seen[i]).Run.Context.History
	}

	first, seen := run(1)
	if h := historyOf(seen); len(h) != 0 {
		t.Fatalf("the first run of a session has history %v", h)
	}
	firstLargest := largest(seen)
	_, seen = run(2)
	h := historyOf(seen)
	if len(h) != 2 || h[0].Role != runctl.RoleUser || !strings.Contains(h[0].Content, "(turn 1)") ||
		h[1].Role != runctl.RoleAssistant || h[1].Content != runctl.Clip(first.Response, runctl.HistoryMessageBytes) {
		t.Fatalf("run 2 history = %+v, want run 1's message and answer %q", h, first.Response)
	}
	trace, err := env.Store.Trace(ctx, store.TraceQuery{TenantID: handlerstest.Tenant, PlanID: orch.PlanID("run-sess-02")})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.ContainsFunc(trace, func(e store.Event) bool {
		return e.EventType == "context.loaded" && strings.Contains(string(e.Payload), "(turn 1)")
	}) {
		t.Error("the trace does not record the history run 2 saw")
	}

	bound := runctl.HistoryKeep*(runctl.HistoryMessageBytes+64) + runctl.HistorySummaryBytes + 64
	for i := 3; i <= 50; i++ {
		_, seen = run(i)
		b, _ := json.Marshal(historyOf(seen))
		if len(b) > bound {
			t.Fatalf("run %d carries %d bytes of history, bound %d", i, len(b), bound)
		}
	}
	h = historyOf(seen)
	if len(h) != runctl.HistoryKeep+1 || h[0].Role != runctl.RoleSummary || !strings.Contains(h[0].Content, "(turn 43)") ||
		strings.Contains(h[0].Content, "(turn 1)") {
		t.Fatalf("run 50 history has %d messages, summary %q", len(h), h[0].Content)
	}
	if !strings.Contains(h[len(h)-2].Content, "(turn 49)") {
		t.Errorf("run 50's newest history message is %q, want turn 49's", h[len(h)-2].Content)
	}
	if got := largest(seen); got > firstLargest+bound {
		t.Errorf("run 50's largest message is %d bytes; run 1's was %d (history bound %d)", got, firstLargest, bound)
	}

	sess, _, err := (&runctl.Sessions{KV: env.Sessions}).Get(ctx, handlerstest.Tenant, handlerstest.Session)
	if err != nil || len(sess.Messages) != runctl.HistoryKeep+1 || sess.UserID != handlerstest.User {
		t.Fatalf("session = %+v (%v)", sess, err)
	}
	// The projector indexed the session and kept every exchange in the
	// user's memory.
	proj, err := env.Store.GetSession(ctx, handlerstest.Tenant, handlerstest.Session)
	if err != nil || !strings.Contains(proj.Messages[len(proj.Messages)-2].Content, "(turn 50)") {
		t.Fatalf("agent_sessions projection = %+v (%v)", proj, err)
	}
	m, err := env.Store.GetMemory(ctx, projector.ExchangeKey(handlerstest.Tenant, handlerstest.User, "run-sess-01"))
	if err != nil || m.Scope != memory.ScopeUser || len(m.Embedding) != handlerstest.Embedder.Dimension() || !strings.Contains(m.Text, "(turn 1)") {
		t.Fatalf("run 1's exchange in memory = %+v (%v)", m.Key, err)
	}
}

// TestSessionAppendIsIdempotent: a redelivered end appends its exchange
// once.
func TestSessionAppendIsIdempotent(t *testing.T) {
	wholeRun(t)
	env := handlerstest.NewEnv(t)
	ctx := handlerstest.Ctx(t)
	s := &runctl.Sessions{KV: env.Sessions}
	req := handlerstest.RunRequest("run-once", "hello")
	at := time.Date(2026, 11, 23, 9, 0, 0, 0, time.UTC)
	for range 2 {
		if _, err := s.Append(ctx, req, "hi there", at, true); err != nil { // the second finds the session made
			t.Fatal(err)
		}
	}
	sess, rev, err := s.Get(ctx, handlerstest.Tenant, handlerstest.Session)
	if err != nil || len(sess.Messages) != 2 || rev != 1 {
		t.Fatalf("session after two appends of one run: %+v rev %d (%v)", sess.Messages, rev, err)
	}
	if _, _, err := s.Get(ctx, "acme", handlerstest.Session); err == nil {
		t.Fatal("another tenant read the session")
	}
}
