package storetest

import (
	"slices"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/agentbus/agentbus/store"
)

// testSessionsListed: ListSessions returns only the tenant's sessions,
// filtered by state and current agent, newest first (started_at, then id)
// and cut to the limit; a backend whose index refreshes in the background
// shows a put session within its refresh interval.
func testSessionsListed(t *testing.T, b Backend) {
	ctx := ctxFor(t)
	f := newFixture()
	other := newFixture()
	put := func(tenant, id, state, agent string, sec int) store.Session {
		s := store.Session{SessionID: id, TenantID: tenant, UserID: "user-1", State: state, AgentID: agent,
			StartedAt: f.at(sec), LastActive: f.at(sec + 1)}
		if state == "handed_off" {
			s.HandoffChain = []string{"agent-a", agent}
			s.Handoff = &store.SessionHandoff{RunID: "run-" + id, GateID: "gate-1", Reason: "needs a person", At: f.at(sec + 1)}
		}
		must(t, "PutSession", b.PutSession(ctx, s))
		return s
	}
	a := put(f.tenant, "s-a", "active", "agent-a", 1)
	h1 := put(f.tenant, "s-h1", "handed_off", "agent-b", 5)
	h2 := put(f.tenant, "s-h2", "handed_off", "agent-c", 9)
	c := put(f.tenant, "s-c", "completed", "agent-a", 3)
	// Same start as h1: the id breaks the tie.
	h0 := put(f.tenant, "s-h0", "handed_off", "agent-b", 5)
	u := store.Session{SessionID: "s-u", TenantID: f.tenant, UserID: "user-2", State: "active", StartedAt: f.at(0)}
	must(t, "PutSession", b.PutSession(ctx, u))
	put(other.tenant, "s-x", "handed_off", "agent-b", 20)

	ids := func(ss []store.Session) []string {
		out := make([]string, len(ss))
		for i, s := range ss {
			out[i] = s.SessionID
		}
		return out
	}
	check := func(what string, q store.SessionQuery, want ...store.Session) {
		t.Helper()
		var got []store.Session
		deadline := time.Now().Add(10 * time.Second)
		for {
			var err error
			got, err = b.ListSessions(ctx, q)
			must(t, "ListSessions "+what, err)
			if slices.Equal(ids(got), ids(want)) || time.Now().After(deadline) {
				break
			}
			time.Sleep(100 * time.Millisecond)
		}
		if !slices.Equal(ids(got), ids(want)) {
			t.Fatalf("ListSessions %s = %v; want %v", what, ids(got), ids(want))
		}
		for i := range want {
			sameJSON(t, what+" "+want[i].SessionID, got[i], want[i])
		}
	}
	check("all", store.SessionQuery{TenantID: f.tenant}, h2, h0, h1, c, a, u)
	check("of a user", store.SessionQuery{TenantID: f.tenant, UserID: "user-2"}, u)
	check("active of user-1", store.SessionQuery{TenantID: f.tenant, UserID: "user-1", Status: "active"}, a)
	check("handed off", store.SessionQuery{TenantID: f.tenant, Status: "handed_off"}, h2, h0, h1)
	check("by agent", store.SessionQuery{TenantID: f.tenant, AgentID: "agent-a"}, c, a)
	check("handed off to agent-b", store.SessionQuery{TenantID: f.tenant, Status: "handed_off", AgentID: "agent-b"}, h0, h1)
	check("limited", store.SessionQuery{TenantID: f.tenant, Limit: 2}, h2, h0)
	check("no match", store.SessionQuery{TenantID: f.tenant, Status: "failed"})
	check("unknown tenant", store.SessionQuery{TenantID: "tenant-" + uuid.NewString()})

	_, err := b.ListSessions(ctx, store.SessionQuery{Status: "active"})
	wantErr(t, "ListSessions without a tenant", err, store.ErrInvalidArgument)
}
