package storetest

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/agentbus/agentbus/store"
)

// idWith returns a unique event id starting with prefix, so that a test
// can decide the order of ids (the tie-break of store.EventQuery).
func idWith(prefix string) string { return prefix + "-" + uuid.NewString() }

// wantEvents runs q and fails unless it returns exactly the ids of want,
// in that order.
func wantEvents(t *testing.T, b Backend, what string, q store.EventQuery, want ...store.Event) []store.Event {
	t.Helper()
	got, err := b.Events(ctxFor(t), q)
	must(t, "Events "+what, err)
	if ids, wantIDs := eventIDs(got), eventIDs(want); !slices.Equal(ids, wantIDs) {
		t.Fatalf("Events %s:\n got: %v\nwant: %v", what, ids, wantIDs)
	}
	return got
}

// testEventsFiltered: Events keeps the tenant's events that pass every
// filter, each event id once, newest first with ties by event id, and the
// queryable figures read back as written.
func testEventsFiltered(t *testing.T, b Backend) {
	ctx := ctxFor(t)
	a, other := newFixture(), newFixture()
	other.session = a.session // the same session id in both tenants
	yes, no := true, false

	web := a.event("skill.called", 10)
	web.EventID, web.SkillID, web.Outcome = idWith("m"), "web", "ok"
	web.DurationMS, web.InputBytes, web.ResponseBytes, web.LargeResponse = 1500, 64, 2<<20, true
	calc := a.event("skill.called", 20)
	calc.EventID, calc.SkillID, calc.Outcome, calc.DurationMS, calc.InputBytes, calc.ResponseBytes = idWith("m"), "calc", "error", 3, 10, 20
	model := a.event("model.called", 30)
	model.EventID, model.Outcome, model.DurationMS = idWith("m"), "ok", 812
	model.InputTokens, model.OutputTokens, model.CostUSD = 1200, 345, 0.00421
	// Same ts: the smaller event id comes first.
	run := a.event("run.finished", 40)
	run.EventID, run.PlanID, run.Outcome, run.TaskType, run.Replans = idWith("b"), "plan-1", "complete", "research", 2
	run.DurationMS, run.InputTokens, run.OutputTokens, run.CostUSD = 61_250, 5000, 1200, 0.125
	web2 := a.event("skill.called", 40)
	web2.EventID, web2.SkillID, web2.TaskID = idWith("a"), "web", "evt-7"
	// Within one millisecond ts still decides, against the id order (some
	// backends sort dates in milliseconds).
	latest, late, early := a.event("subagent.finish", 50), a.event("subagent.finish", 50), a.event("subagent.finish", 50)
	latest.EventID, late.EventID, early.EventID = idWith("z"), idWith("y"), idWith("a")
	latest.TS = latest.TS.Add(900 * time.Microsecond)
	late.TS = late.TS.Add(300 * time.Microsecond)
	early.TS = early.TS.Add(100 * time.Microsecond)
	// Another session of the tenant: Events spans the tenant.
	elsewhere := a
	elsewhere.session = "session-" + uuid.NewString()
	old := elsewhere.event("skill.called", 5)
	old.EventID, old.SkillID = idWith("m"), "web"

	// Another tenant with events that pass every filter.
	foreign := other.event("skill.called", 10)
	foreign.EventID, foreign.SkillID, foreign.LargeResponse = idWith("a"), "web", true
	foreign2 := other.event("run.finished", 45)
	foreign2.EventID, foreign2.TaskID = idWith("a"), "evt-7"

	must(t, "AppendEvents", b.AppendEvents(ctx, []store.Event{calc, latest, web, foreign, early}))
	must(t, "AppendEvents", b.AppendEvents(ctx, []store.Event{run, old, late, web2, model, foreign2}))
	// Re-appended: stored once.
	must(t, "AppendEvents again", b.AppendEvents(ctx, []store.Event{web, run}))

	all := []store.Event{latest, late, early, web2, run, model, calc, web, old}
	got := wantEvents(t, b, "of the tenant", store.EventQuery{TenantID: a.tenant}, all...)
	for i := range all {
		sameJSON(t, "event "+all[i].EventType, got[i], all[i])
	}
	wantEvents(t, b, "of the other tenant", store.EventQuery{TenantID: other.tenant}, foreign2, foreign)
	wantEvents(t, b, "of a tenant without events", store.EventQuery{TenantID: newFixture().tenant})

	wantEvents(t, b, "by type", store.EventQuery{TenantID: a.tenant, EventTypes: []string{"skill.called"}},
		web2, calc, web, old)
	wantEvents(t, b, "by types", store.EventQuery{TenantID: a.tenant, EventTypes: []string{"run.finished", "model.called", "nope"}},
		run, model)
	wantEvents(t, b, "by unknown type", store.EventQuery{TenantID: a.tenant, EventTypes: []string{"skill"}})
	wantEvents(t, b, "by skill", store.EventQuery{TenantID: a.tenant, SkillID: "web"}, web2, web, old)
	wantEvents(t, b, "by task", store.EventQuery{TenantID: a.tenant, TaskID: "evt-7"}, web2)
	wantEvents(t, b, "by task of the other tenant", store.EventQuery{TenantID: other.tenant, TaskID: "evt-7"}, foreign2)
	wantEvents(t, b, "by unknown task", store.EventQuery{TenantID: a.tenant, TaskID: "evt-8"})
	wantEvents(t, b, "by skill and type", store.EventQuery{TenantID: a.tenant, SkillID: "calc", EventTypes: []string{"skill.called"}},
		calc)

	// Since is inclusive, Until exclusive.
	wantEvents(t, b, "since", store.EventQuery{TenantID: a.tenant, Since: a.at(30)}, latest, late, early, web2, run, model)
	wantEvents(t, b, "until", store.EventQuery{TenantID: a.tenant, Until: a.at(20)}, web, old)
	wantEvents(t, b, "since and until", store.EventQuery{TenantID: a.tenant, Since: a.at(20), Until: a.at(40)}, model, calc)
	wantEvents(t, b, "empty window", store.EventQuery{TenantID: a.tenant, Since: a.at(40), Until: a.at(40)})
	wantEvents(t, b, "wide window", store.EventQuery{TenantID: a.tenant,
		Since: time.Date(1969, 12, 31, 23, 59, 59, 999_500_000, time.UTC), Until: time.Date(9999, 12, 31, 23, 59, 59, 999_999_999, time.UTC)},
		all...)
	// Bounds inside a millisecond.
	mid := a.at(50).Add(200 * time.Microsecond)
	wantEvents(t, b, "since within a millisecond", store.EventQuery{TenantID: a.tenant, Since: mid}, latest, late)
	wantEvents(t, b, "until within a millisecond", store.EventQuery{TenantID: a.tenant, Since: a.at(41), Until: mid}, early)
	wantEvents(t, b, "since exactly", store.EventQuery{TenantID: a.tenant, Since: late.TS}, latest, late)
	wantEvents(t, b, "until exactly", store.EventQuery{TenantID: a.tenant, Since: a.at(41), Until: late.TS}, early)

	wantEvents(t, b, "large responses", store.EventQuery{TenantID: a.tenant, LargeResponse: &yes}, web)
	wantEvents(t, b, "not large responses", store.EventQuery{TenantID: a.tenant, LargeResponse: &no},
		latest, late, early, web2, run, model, calc, old)
	wantEvents(t, b, "every filter", store.EventQuery{TenantID: a.tenant, EventTypes: []string{"skill.called", "model.called"},
		SkillID: "web", Since: a.at(10), Until: a.at(41), LargeResponse: &no}, web2)
	wantEvents(t, b, "every filter, large", store.EventQuery{TenantID: a.tenant, EventTypes: []string{"skill.called"},
		SkillID: "web", Since: a.at(10), Until: a.at(41), LargeResponse: &yes}, web)

	// Limit keeps the newest, also within one millisecond.
	wantEvents(t, b, "limit 1", store.EventQuery{TenantID: a.tenant, Limit: 1}, latest)
	wantEvents(t, b, "limit 2", store.EventQuery{TenantID: a.tenant, Limit: 2}, latest, late)
	wantEvents(t, b, "limit 4", store.EventQuery{TenantID: a.tenant, Limit: 4}, latest, late, early, web2)
	wantEvents(t, b, "limit 5", store.EventQuery{TenantID: a.tenant, Limit: 5}, latest, late, early, web2, run)
	wantEvents(t, b, "limit after filter", store.EventQuery{TenantID: a.tenant, SkillID: "web", Limit: 2}, web2, web)
	wantEvents(t, b, "limit 0", store.EventQuery{TenantID: a.tenant, Limit: 0}, all...)
	wantEvents(t, b, "negative limit", store.EventQuery{TenantID: a.tenant, Limit: -1}, all...)
	wantEvents(t, b, "limit past the maximum", store.EventQuery{TenantID: a.tenant, Limit: store.MaxEventLimit + 1}, all...)
}

// testEventsLimit: without a limit Events returns the newest
// store.DefaultEventLimit events; a limit past store.MaxEventLimit is
// capped, not refused.
func testEventsLimit(t *testing.T, b Backend) {
	ctx := ctxFor(t)
	f := newFixture()
	n := store.DefaultEventLimit + 20
	evs := make([]store.Event, n)
	for i := range evs {
		evs[i] = f.event("tick", i/2) // pairs share a ts
		evs[i].EventID = fmt.Sprintf("%s-%04d", f.tenant, n-i)
		evs[i].DurationMS = int64(i)
	}
	must(t, "AppendEvents", b.AppendEvents(ctx, evs))
	// Newest first, and of a pair the later appended has the smaller id.
	want := slices.Clone(evs)
	slices.Reverse(want)
	wantEvents(t, b, "default limit", store.EventQuery{TenantID: f.tenant}, want[:store.DefaultEventLimit]...)
	wantEvents(t, b, "limit past the maximum", store.EventQuery{TenantID: f.tenant, Limit: store.MaxEventLimit * 10}, want...)
	wantEvents(t, b, "limit 7", store.EventQuery{TenantID: f.tenant, Limit: 7}, want[:7]...)
	wantEvents(t, b, "limit 7 since", store.EventQuery{TenantID: f.tenant, Since: f.at(10), Limit: 7}, want[:7]...)
	wantEvents(t, b, "until, default limit", store.EventQuery{TenantID: f.tenant, Until: f.at(10)}, want[len(want)-20:]...)
}
