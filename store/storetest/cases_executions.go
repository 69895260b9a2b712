package storetest

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/agentbus/agentbus/store"
)

// testExecutionsListed: execution records are stored once per run id (a
// rewrite replaces), read by id only within their tenant, listed newest
// first with the agent, session, user, status and since filters and the
// limit, and a record past the store's TTL is neither read nor listed.
func testExecutionsListed(t *testing.T, b Backend) {
	ctx := ctxFor(t)
	f := newFixture()
	other := newFixture()
	// Records of the last minutes: the fixture's base is fixed in the
	// past, and the store hides what is older than its TTL.
	base := time.Now().UTC().Add(-10 * time.Minute).Truncate(time.Millisecond)
	at := func(sec int) time.Time { return base.Add(time.Duration(sec) * time.Second) }
	rec := func(tenant, id, agent, session, code string, sec int, edits ...func(*store.Execution)) store.Execution {
		e := store.Execution{ExecutionID: id, TenantID: tenant, SessionID: session, AgentID: agent, UserID: "user-1",
			Input: "what is the weather in " + id, Output: "sunny", LatencyMS: int64(100 * sec), TokensIn: 10 + sec, TokensOut: 5,
			ToolCalls: []store.ToolCallCount{{Name: "weather", Calls: 2, Errors: 1}}, Status: store.ExecutionStatus(code),
			TerminalCode: code, HandoffChain: []string{agent}, CreatedAt: at(sec)}
		if code != "SUCCESS" {
			e.ErrorCode, e.ErrorReason = code, "it went wrong"
		}
		for _, edit := range edits {
			edit(&e)
		}
		must(t, "PutExecution", b.PutExecution(ctx, e))
		return e
	}
	rec(f.tenant, "run-1", "agent-a", "s-1", "SUCCESS", 1)
	// A tenant that keeps payload records: the record holds the model
	// calls' requests and answers and the tool results, read back whole.
	e2 := rec(f.tenant, "run-2", "agent-b", "s-1", "REPEATED_FAILURE", 2, func(e *store.Execution) {
		e.ModelCalls = []store.ModelCallRecord{
			{Task: "route", PromptVersion: "route@v4", Model: "gpt-test", Request: `{"input":{"task":"weather in [EMAIL]'s city"}}`,
				Response: `{"task_type":"general"}`, TS: at(2)},
			{Task: "act", TaskID: "t-1", Request: strings.Repeat("é", 4000), Error: "model unavailable", TS: at(2)}}
		e.ToolResults = []store.ToolResultRecord{{Name: "weather", TaskID: "t-1", Arguments: `{"city":"Paris"}`,
			Result: `{"forecast":"sunny"}`, TS: at(2)}, {Name: "weather", Result: "timeout", IsError: true}}
		e.PayloadsClipped = true
	})
	e3 := rec(f.tenant, "run-3", "agent-a", "s-2", "TIMEOUT", 3)
	e0 := rec(f.tenant, "run-0", "agent-a", "s-2", "SUCCESS", 3) // same time as e3: the id breaks the tie
	// A redelivered run.finished writes the same record again: still one.
	e1 := rec(f.tenant, "run-1", "agent-a", "s-1", "SUCCESS", 1)
	x := rec(other.tenant, "run-x", "agent-a", "s-1", "SUCCESS", 4)
	// Past the TTL (the longest a test store is configured with is the
	// default, 30 days).
	old := store.Execution{ExecutionID: "run-old", TenantID: f.tenant, AgentID: "agent-a", Status: store.ExecutionSuccess,
		TerminalCode: "SUCCESS", CreatedAt: time.Now().UTC().Add(-store.DefaultExecutionTTL - 48*time.Hour)}
	must(t, "PutExecution old", b.PutExecution(ctx, old))

	ids := func(es []store.Execution) []string {
		out := make([]string, len(es))
		for i, e := range es {
			out[i] = e.ExecutionID
		}
		return out
	}
	check := func(what string, q store.ExecutionQuery, want ...store.Execution) {
		t.Helper()
		var got []store.Execution
		deadline := time.Now().Add(10 * time.Second)
		for {
			var err error
			got, err = b.ListExecutions(ctx, q)
			must(t, "ListExecutions "+what, err)
			if slices.Equal(ids(got), ids(want)) || time.Now().After(deadline) {
				break
			}
			time.Sleep(100 * time.Millisecond)
		}
		if !slices.Equal(ids(got), ids(want)) {
			t.Fatalf("ListExecutions %s = %v; want %v", what, ids(got), ids(want))
		}
		for i := range want {
			sameJSON(t, what+" "+want[i].ExecutionID, got[i], want[i])
		}
	}
	check("all", store.ExecutionQuery{TenantID: f.tenant}, e0, e3, e2, e1)
	check("of agent-a", store.ExecutionQuery{TenantID: f.tenant, AgentID: "agent-a"}, e0, e3, e1)
	check("of session s-1", store.ExecutionQuery{TenantID: f.tenant, SessionID: "s-1"}, e2, e1)
	check("failed", store.ExecutionQuery{TenantID: f.tenant, Status: store.ExecutionFailed}, e2)
	check("timed out of agent-a", store.ExecutionQuery{TenantID: f.tenant, AgentID: "agent-a", Status: store.ExecutionTimeout}, e3)
	check("since", store.ExecutionQuery{TenantID: f.tenant, Since: at(2)}, e0, e3, e2)
	check("limited", store.ExecutionQuery{TenantID: f.tenant, Limit: 2}, e0, e3)
	check("other user", store.ExecutionQuery{TenantID: f.tenant, UserID: "user-2"})
	check("other tenant", store.ExecutionQuery{TenantID: other.tenant}, x)

	got, err := b.GetExecution(ctx, f.tenant, "run-2")
	must(t, "GetExecution", err)
	sameJSON(t, "GetExecution", got, e2)
	_, err = b.GetExecution(ctx, other.tenant, "run-2")
	wantErr(t, "GetExecution of another tenant", err, store.ErrNotFound)
	_, err = b.GetExecution(ctx, f.tenant, "run-old")
	wantErr(t, "GetExecution past the TTL", err, store.ErrNotFound)
	_, err = b.GetExecution(ctx, f.tenant, "run-none")
	wantErr(t, "GetExecution of no run", err, store.ErrNotFound)
	_, err = b.ListExecutions(ctx, store.ExecutionQuery{AgentID: "agent-a"})
	wantErr(t, "ListExecutions without a tenant", err, store.ErrInvalidArgument)

	bad := e1
	bad.Status = "done"
	wantSchemaError(t, "PutExecution with an unknown status", b.PutExecution(ctx, bad), store.IndexExecutions, "/status")
	bad = e1
	bad.ToolResults = []store.ToolResultRecord{{Name: "weather", Result: strings.Repeat("x", 9000)}}
	wantSchemaError(t, "PutExecution with an unclipped tool result", b.PutExecution(ctx, bad), store.IndexExecutions,
		"/tool_results/0/result")
}
