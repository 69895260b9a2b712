package storetest

import (
	"testing"
	"time"

	json "github.com/go-json-experiment/json/v1"
	"github.com/google/uuid"

	"github.com/agentbus/agentbus/store"
)

func testRoundTrip(t *testing.T, b Backend) {
	ctx := ctxFor(t)
	f := newFixture()

	m := f.memory("result", `{"answer":42}`)
	m.Embedding = vec(0.25, -0.5, 0.125, 1)
	m.StepIndex = 2
	m.PlanID = "plan-1"
	m.LockedBy = "worker-1"
	m.LockExpires = f.at(30)
	m.TTLAt = f.at(3600)
	put, err := b.PutMemory(ctx, m)
	must(t, "PutMemory", err)
	if put.Version.IsZero() {
		t.Fatalf("PutMemory returned zero version")
	}
	got, err := b.GetMemory(ctx, m.Key)
	must(t, "GetMemory", err)
	sameJSON(t, "memory", got, m)
	if got.Version != put.Version {
		t.Fatalf("GetMemory version %+v, PutMemory returned %+v", got.Version, put.Version)
	}

	p := f.plan(store.PlanStatusReplanning, 1)
	p.CompletedAt = f.at(90)
	p.Steps = []store.PlanStep{
		{StepIndex: 0, Task: "search", Skills: []string{"web"}, ReturnSpec: json.RawMessage(`{"type":"object"}`),
			Status: store.StepStatusComplete, TaskID: "task-0", MemoryKey: "k0", Validated: true,
			StartedAt: f.at(1), FinishedAt: f.at(2)},
		{StepIndex: 1, Task: "summarise", InputFromStep: []int{0}, Status: store.StepStatusFailed,
			FailureReason: "timeout", StartedAt: f.at(3)},
	}
	p.ReplanHistory = []store.ReplanRecord{{Attempt: 1, Trigger: "step_failed", FailedStep: 1, Reason: "timeout", RevisedAt: f.at(4)}}
	must(t, "PutPlan", b.PutPlan(ctx, p, 7))
	gotPlan, version, err := b.GetPlan(ctx, f.tenant, p.PlanID)
	must(t, "GetPlan", err)
	sameJSON(t, "plan", gotPlan, p)
	if version != 7 {
		t.Fatalf("GetPlan version %d, want 7", version)
	}

	ev := f.event("task.completed", 5)
	ev.PlanID, ev.TaskID, ev.SkillID, ev.ScriptHash = p.PlanID, "task-0", "skill-1", "sha256:abc"
	must(t, "AppendEvents", b.AppendEvents(ctx, []store.Event{ev}))
	trace, err := b.Trace(ctx, store.TraceQuery{TenantID: f.tenant, SessionID: f.session})
	must(t, "Trace", err)
	sameJSON(t, "trace", trace, []store.Event{ev})

	souls := map[string]store.Soul{}
	for _, user := range []string{"", "user:1"} {
		soul := store.Soul{
			ID: uuid.NewString(), TenantID: f.tenant, UserID: user, Key: "default",
			Persona:   store.Persona{Name: "Ada " + user, SystemPrompt: "Be precise.", Tone: "dry", Language: "en"},
			Policies:  json.RawMessage(`{"max_steps":5,"tools":["web"]}`),
			UpdatedAt: f.at(6),
		}
		if user != "" {
			// Before the user has a soul of their own, the tenant's.
			got, err := b.SoulFor(ctx, f.tenant, user)
			must(t, "SoulFor without the user's", err)
			sameJSON(t, "soul for "+user+" before their own", got, souls[""])
		}
		must(t, "PutSoul", b.PutSoul(ctx, soul))
		souls[user] = soul
		gotSoul, err := b.GetSoul(ctx, f.tenant, user)
		must(t, "GetSoul", err)
		sameJSON(t, "soul "+user, gotSoul, soul)
		gotSoul, err = b.SoulFor(ctx, f.tenant, user)
		must(t, "SoulFor", err)
		sameJSON(t, "soul for "+user, gotSoul, soul)
	}
	another, err := b.SoulFor(ctx, f.tenant, "user:2")
	must(t, "SoulFor another user", err)
	sameJSON(t, "soul for another user", another, souls[""])

	sess := store.Session{
		SessionID: f.session, TenantID: f.tenant, UserID: "user-1", State: "active",
		StartedAt: f.at(0), LastActive: f.at(8),
		Messages: []store.SessionMessage{
			{MsgID: "m1", Role: "user", Content: "hi", TS: f.at(0)},
			{MsgID: "m2", Role: "assistant", Content: "hello <there> & welcome", TS: f.at(1)},
		},
	}
	must(t, "PutSession", b.PutSession(ctx, sess))
	gotSess, err := b.GetSession(ctx, f.tenant, f.session)
	must(t, "GetSession", err)
	sameJSON(t, "session", gotSess, sess)

	// A session handed to a human keeps its agents, depth and the packet
	// a reply answers, its context an opaque object.
	sess.State, sess.AgentID, sess.ParentAgentID, sess.HandoffDepth, sess.TurnCount = "handed_off", "agent-b", "agent-a", 1, 4
	sess.HandoffReason = "billing question"
	sess.Handoff = &store.SessionHandoff{RunID: "run-1", GateID: "gate-1", Reason: "asks for a person", Priority: "high",
		Summary: "user: hi", Context: json.RawMessage(`{"order":"ORD-1","nested":{"n":2}}`), Agents: []string{"agent-a", "agent-b"},
		Trigger: "handoff_to_human", At: f.at(9)}
	must(t, "PutSession handed off", b.PutSession(ctx, sess))
	gotSess, err = b.GetSession(ctx, f.tenant, f.session)
	must(t, "GetSession handed off", err)
	sameJSON(t, "handed-off session", gotSess, sess)
}

func testNotFound(t *testing.T, b Backend) {
	ctx := ctxFor(t)
	f := newFixture()
	_, err := b.GetMemory(ctx, f.tenant+":missing")
	wantErr(t, "GetMemory", err, store.ErrNotFound)
	_, _, err = b.GetPlan(ctx, f.tenant, "plan-"+uuid.NewString())
	wantErr(t, "GetPlan", err, store.ErrNotFound)
	_, err = b.GetSoul(ctx, f.tenant, "")
	wantErr(t, "GetSoul", err, store.ErrNotFound)
	_, err = b.SoulFor(ctx, f.tenant, "user-1")
	wantErr(t, "SoulFor", err, store.ErrNotFound)
	_, err = b.GetSession(ctx, f.tenant, f.session)
	wantErr(t, "GetSession", err, store.ErrNotFound)
	trace, err := b.Trace(ctx, store.TraceQuery{TenantID: f.tenant, SessionID: f.session})
	must(t, "Trace", err)
	if len(trace) != 0 {
		t.Fatalf("Trace of empty session returned %d events", len(trace))
	}
	hits, err := b.QueryMemory(ctx, store.MemoryQuery{TenantID: f.tenant, Vector: vec(1, 0)})
	must(t, "QueryMemory", err)
	if len(hits) != 0 {
		t.Fatalf("QueryMemory of empty tenant returned %d hits", len(hits))
	}
	h, err := b.Health(ctx, f.tenant)
	must(t, "Health", err)
	if h.Plans != 0 {
		t.Fatalf("Health of empty tenant counted %d plans", h.Plans)
	}
}

func testInvalidArguments(t *testing.T, b Backend) {
	ctx := ctxFor(t)
	_, err := b.QueryMemory(ctx, store.MemoryQuery{Vector: []float32{1}})
	wantErr(t, "QueryMemory without tenant", err, store.ErrInvalidArgument)
	_, err = b.Trace(ctx, store.TraceQuery{SessionID: "s"})
	wantErr(t, "Trace without tenant", err, store.ErrInvalidArgument)
	_, err = b.Trace(ctx, store.TraceQuery{TenantID: "t"})
	wantErr(t, "Trace without session or plan", err, store.ErrInvalidArgument)
	_, err = b.Health(ctx, "")
	wantErr(t, "Health without tenant", err, store.ErrInvalidArgument)
	_, err = b.Events(ctx, store.EventQuery{EventTypes: []string{"x"}, SkillID: "s", Limit: 5})
	wantErr(t, "Events without tenant", err, store.ErrInvalidArgument)
}

func testSchemaViolation(t *testing.T, b Backend) {
	ctx := ctxFor(t)
	f := newFixture()

	p := f.plan("bogus", 0)
	wantSchemaError(t, "PutPlan", b.PutPlan(ctx, p, 1), store.IndexPlans, "/status")
	_, _, err := b.GetPlan(ctx, f.tenant, p.PlanID)
	wantErr(t, "GetPlan after rejected put", err, store.ErrNotFound)

	p = f.plan(store.PlanStatusExecuting, 0)
	p.Steps = []store.PlanStep{{StepIndex: 0, Status: "done"}}
	wantSchemaError(t, "PutPlan bad step", b.PutPlan(ctx, p, 1), store.IndexPlans, "/steps/0/status")

	m := f.memory("orphan", "{}")
	m.TenantID = ""
	_, err = b.PutMemory(ctx, m)
	wantSchemaError(t, "PutMemory", err, store.IndexMemory, "/tenant_id")
	_, err = b.CreateMemory(ctx, m)
	wantSchemaError(t, "CreateMemory", err, store.IndexMemory, "/tenant_id")
	_, err = b.GetMemory(ctx, m.Key)
	wantErr(t, "GetMemory after rejected put", err, store.ErrNotFound)

	m = f.memory("undated", "{}")
	m.CreatedAt = time.Time{}
	_, err = b.PutMemory(ctx, m)
	wantSchemaError(t, "PutMemory without created_at", err, store.IndexMemory, "/created_at")

	good, bad := f.event("ok", 1), f.event("", 2)
	err = b.AppendEvents(ctx, []store.Event{good, bad})
	wantSchemaError(t, "AppendEvents", err, store.IndexEvents, "/event_type")
	trace, err := b.Trace(ctx, store.TraceQuery{TenantID: f.tenant, SessionID: f.session})
	must(t, "Trace after rejected batch", err)
	if len(trace) != 0 {
		t.Fatalf("rejected batch stored %d events", len(trace))
	}

	good, negative := f.event("ok", 3), f.event("skill.called", 4)
	negative.DurationMS = -1
	err = b.AppendEvents(ctx, []store.Event{good, negative})
	wantSchemaError(t, "AppendEvents negative duration_ms", err, store.IndexEvents, "/duration_ms")
	evs, err := b.Events(ctx, store.EventQuery{TenantID: f.tenant})
	must(t, "Events after rejected batch", err)
	if len(evs) != 0 {
		t.Fatalf("batch with a negative duration_ms stored %d events", len(evs))
	}

	err = b.PutSoul(ctx, store.Soul{TenantID: f.tenant})
	wantSchemaError(t, "PutSoul", err, store.IndexSouls, "/id")
	_, err = b.GetSoul(ctx, f.tenant, "")
	wantErr(t, "GetSoul after rejected put", err, store.ErrNotFound)

	err = b.PutSession(ctx, store.Session{SessionID: f.session})
	wantSchemaError(t, "PutSession", err, store.IndexSessions, "/tenant_id")
	_, err = b.GetSession(ctx, f.tenant, f.session)
	wantErr(t, "GetSession after rejected put", err, store.ErrNotFound)
}
