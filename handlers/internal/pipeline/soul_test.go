package pipeline

import (
	"slices"
	"strings"
	"testing"

	"github.com/cloudevents/sdk-go/v2/event"

	"github.com/agentbus/agentbus/events"
	"github.com/agentbus/agentbus/orch"
	"github.com/agentbus/agentbus/store"
)

// TestSoulShapesTheRun: the router loads the user's soul (else the
// tenant's) into the run's context; the planner gets it and the
// synthesiser answers as it.
func TestSoulShapesTheRun(t *testing.T) {
	env := newEnv(t)
	f := newFlow(t, env, env.st)
	ctx := testCtx(t)
	for _, s := range []store.Soul{
		{ID: "soul-beta", TenantID: testTenant, Persona: store.Persona{Name: "Ada", SystemPrompt: "Be brief."}},
		{ID: "soul-beta-other", TenantID: testTenant, UserID: "someone-else", Persona: store.Persona{Name: "Eve"}},
	} {
		if err := env.st.PutSoul(ctx, s); err != nil {
			t.Fatal(err)
		}
	}
	res, seen := f.drive(t, newEvent(t, "run-soul", events.TypeRunRequested, runRequest("run-soul", rankTask)))
	if res.TerminalCode != orch.CodeSuccess || !strings.HasPrefix(res.Response, "Ada — ") {
		t.Fatalf("run ended %s with %q, want an answer as Ada", res.TerminalCode, res.Response)
	}
	i := slices.IndexFunc(seen, func(ev event.Event) bool { return ev.Type() == events.TypePlanRequested })
	if p := decode[orch.PlanRequest](t, seen[i]).Run.Context.Persona; p == nil || p.Instructions != "Be brief." {
		t.Errorf("the planner got persona %+v", p)
	}
	if err := env.st.PutSoul(ctx, store.Soul{ID: "soul-beta-user-1", TenantID: testTenant, UserID: testUser,
		Persona: store.Persona{Name: "Bea"}}); err != nil {
		t.Fatal(err)
	}
	res, _ = f.drive(t, newEvent(t, "run-soul-2", events.TypeRunRequested, runRequest("run-soul-2", rankTask)))
	if !strings.HasPrefix(res.Response, "Bea — ") {
		t.Errorf("with a soul of its own, the user got %q", res.Response)
	}
}
