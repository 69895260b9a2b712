package storetest

import (
	"errors"

	"testing"

	"github.com/agentbus/agentbus/store"
)

// testTenantIsolation: every read by id takes the tenant, and another
// tenant's document reads exactly as a missing one; a session id used by
// two tenants names two sessions.
func testTenantIsolation(t *testing.T, b Backend) {
	ctx := ctxFor(t)
	a, other := newFixture(), newFixture()
	other.session = a.session // the same session id in both tenants

	p := a.plan(store.PlanStatusComplete, 0)
	must(t, "PutPlan", b.PutPlan(ctx, p, 1))
	if _, _, err := b.GetPlan(ctx, other.tenant, p.PlanID); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("GetPlan by another tenant = %v, want store.ErrNotFound", err)
	}
	if _, _, err := b.GetPlan(ctx, "", p.PlanID); !errors.Is(err, store.ErrInvalidArgument) {
		t.Errorf("GetPlan without tenant = %v, want store.ErrInvalidArgument", err)
	}
	if got, _, err := b.GetPlan(ctx, a.tenant, p.PlanID); err != nil || got.PlanID != p.PlanID {
		t.Errorf("GetPlan by its tenant = %+v, %v", got, err)
	}

	ev := a.event("step_1.started", 1)
	ev.PlanID = p.PlanID
	must(t, "AppendEvents", b.AppendEvents(ctx, []store.Event{ev}))
	got, err := b.Trace(ctx, store.TraceQuery{TenantID: other.tenant, PlanID: p.PlanID})
	must(t, "Trace by another tenant", err)
	if len(got) != 0 {
		t.Errorf("Trace of another tenant's plan = %d events, want none", len(got))
	}

	for i, f := range []fixture{a, other} {
		s := store.Session{SessionID: f.session, TenantID: f.tenant, UserID: "user-1", State: "active",
			StartedAt: f.at(0), LastActive: f.at(i + 1),
			Messages: []store.SessionMessage{{MsgID: "m1", Role: "user", Content: f.tenant, TS: f.at(0)}}}
		must(t, "PutSession", b.PutSession(ctx, s))
	}
	for _, f := range []fixture{a, other} {
		s, err := b.GetSession(ctx, f.tenant, f.session)
		must(t, "GetSession", err)
		if s.TenantID != f.tenant || len(s.Messages) != 1 || s.Messages[0].Content != f.tenant {
			t.Errorf("session %s of %s = %+v: the tenants' sessions collide", f.session, f.tenant, s)
		}
	}
	if _, err := b.GetSession(ctx, newFixture().tenant, a.session); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("GetSession by a third tenant = %v, want store.ErrNotFound", err)
	}
}
