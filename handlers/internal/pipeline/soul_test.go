package pipeline

import (
	"slices"
	"strings"
	"testing"

	"github.com/cloudevents/sdk-go/v2/event"

	"github.com/agentbus/agentbus/events"
	"github.com/agentbus/agentbus/handlers/internal/handlerstest"
	"github.com/agentbus/agentbus/orch"
	"github.com/agentbus/agentbus/store"
)

// TestSoulShapesTheRun: the router loads the user's soul (else the
// tenant's) into the run's context; the planner gets it and the
// synthesiser answers as it.
func TestSoulShapesTheRun(t *testing.T) {
	wholeRun(t)
	env := handlerstest.NewEnv(t)
	f := newFlow(t, env, env.Store)
	ctx := handlerstest.Ctx(t)
	for _, s := range []store.Soul{
		{ID: "soul-beta", TenantID: handlerstest.Tenant, Persona: store.Persona{Name: "Ada", SystemPrompt: "Be brief."}},
		{ID: "soul-beta-other", TenantID: handlerstest.Tenant, UserID: "someone-else", Persona: store.Persona{Name: "Eve"}},
	} {
		if err := env.Store.PutSoul(ctx, s); err != nil {
			t.Fatal(err)
		}
	}
	res, seen := f.drive(t, handlerstest.NewEvent(t, "run-soul", events.TypeRunRequested, handlerstest.RunRequest("run-soul", handlerstest.RankTask)))
	if res.TerminalCode != orch.CodeSuccess || !strings.HasPrefix(res.Response, "Ada — ") {
		t.Fatalf("run ended %s with %q, want an answer as Ada", res.TerminalCode, res.Response)
	}
	i := slices.IndexFunc(seen, func(ev event.Event) bool { return ev.Type() == events.TypePlanRequested })
	if p := handlerstest.Decode[orch.PlanRequest](t, seen[i]).Run.Context.Persona; p == nil || p.Instructions != "Be brief." {
		t.Errorf("the planner got persona %+v", p)
	}
	if err := env.Store.PutSoul(ctx, store.Soul{ID: "soul-beta-user-1", TenantID: handlerstest.Tenant, UserID: handlerstest.User,
		Persona: store.Persona{Name: "Bea"}}); err != nil {
		t.Fatal(err)
	}
	res, _ = f.drive(t, handlerstest.NewEvent(t, "run-soul-2", events.TypeRunRequested, handlerstest.RunRequest("run-soul-2", handlerstest.RankTask)))
	if !strings.HasPrefix(res.Response, "Bea — ") {
		t.Errorf("with a soul of its own, the user got %q", res.Response)
	}
}
