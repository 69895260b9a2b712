package app

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/cloudevents/sdk-go/v2/event"

	"github.com/agentbus/agentbus/events"
	"github.com/agentbus/agentbus/handlers"
)

func TestRolesAreConsistent(t *testing.T) {
	if err := CheckRoles(Roles); err != nil {
		t.Fatal(err)
	}
	// Every orchestration type is consumed by exactly the roles whose
	// routes name it.
	for _, typ := range []string{events.TypeRunRequested, events.TypePlanRequested, events.TypePlanProposed,
		events.TypeStepRequested, events.TypeStepIterated, events.TypeStepFinished, events.TypeGroupJoined, events.TypeStepJoined, events.TypeDeadLettered} {
		if !slices.ContainsFunc(Roles, func(r Role) bool { return r.consumes(typ) }) {
			t.Errorf("no role consumes %s", typ)
		}
	}
}

func TestUndeclaredEmitFailsStartup(t *testing.T) {
	roles := slices.Clone(Roles)
	i := slices.IndexFunc(roles, func(r Role) bool { return r.Name == handlers.RoleAggregator })
	roles[i].Emits = append(slices.Clone(roles[i].Emits), "io.agentbus.group.exploded")
	err := CheckRoles(roles)
	if err == nil || !strings.Contains(err.Error(), "aggregator emits io.agentbus.group.exploded, which no role consumes") {
		t.Fatalf("CheckRoles = %v, want the undeclared type named", err)
	}

	// A role that reads trails reads nothing else: its worker hands over
	// a message's trail, not the message.
	roles = slices.Clone(Roles)
	i = slices.IndexFunc(roles, func(r Role) bool { return r.Name == handlers.RolePlanner })
	projector, _ := RoleNamed(handlers.RoleProjector)
	roles[i].Routes = append(slices.Clone(roles[i].Routes), projector.Routes...)
	if err := CheckRoles(roles); err == nil || !strings.Contains(err.Error(), "planner consumes audit trails and events") {
		t.Fatalf("CheckRoles = %v, want the mix named", err)
	}
}

// TestWiredRoutesMatchTheDeclaration: a handler wired with routes its
// declaration (and so its consumer's filters) lacks fails at startup.
func TestWiredRoutesMatchTheDeclaration(t *testing.T) {
	planner, _ := RoleNamed(handlers.RolePlanner)
	aggregator, _ := RoleNamed(handlers.RoleAggregator)
	if err := planner.checkRoutes(planner.Routes); err != nil {
		t.Fatalf("checkRoutes of the declared routes: %v", err)
	}
	err := planner.checkRoutes(append(slices.Clone(planner.Routes), aggregator.Routes...))
	if err == nil || !strings.Contains(err.Error(), "role planner: its handler routes") || !strings.Contains(err.Error(), events.TypeStepFinished) {
		t.Fatalf("checkRoutes = %v, want the extra route named", err)
	}
}

// TestTopologyDerivesFromRoles: each role's consumer reads the stream and
// subjects of its routes.
func TestTopologyDerivesFromRoles(t *testing.T) {
	want := map[string]events.Consumer{
		handlers.RoleRouter: {Name: handlers.RoleRouter, Stream: events.StreamAgent,
			Filters: []string{"agent.run.requested.*", "agent.plan.proposed.*", "agent.group.joined.*", "agent.step.joined.*", "agent.run.deadline.*", "agent.approval.decided.*", "agent.dead.*"}},
		handlers.RolePlanner:    {Name: handlers.RolePlanner, Stream: events.StreamAgent, Filters: []string{"agent.plan.requested.*"}},
		handlers.RoleExecutor:   {Name: handlers.RoleExecutor, Stream: events.StreamAgent, Filters: []string{"agent.step.requested.*", "agent.step.iterated.*"}},
		handlers.RoleAggregator: {Name: handlers.RoleAggregator, Stream: events.StreamAgent, Filters: []string{"agent.step.finished.*", "agent.group.deadline.*"}},
		handlers.RoleProjector:  {Name: handlers.RoleProjector, Stream: events.StreamAgent, Filters: []string{"agent.>"}, Unlimited: true},
		handlers.RoleMonitor:    {Name: handlers.RoleMonitor, Stream: events.StreamAgent, Filters: []string{"agent.alert.evaluate.*"}},
		// The ingress's: inbound events, plain JSON from outside.
		handlers.RoleInbound: {Name: handlers.RoleInbound, Stream: events.StreamAgent, Filters: []string{"agent.inbound.*"}, Unlimited: true},
	}
	topo := Topology(events.Topology{})
	if len(topo.Consumers) != len(want) || len(topo.Buckets) != len(handlers.Buckets) {
		t.Fatalf("topology has %d consumers and %d buckets, want %d and %d", len(topo.Consumers), len(topo.Buckets), len(want), len(handlers.Buckets))
	}
	for _, c := range topo.Consumers {
		w := want[c.Name]
		if c.Stream != w.Stream || !slices.Equal(c.Filters, w.Filters) || c.Unlimited != w.Unlimited {
			t.Errorf("consumer %+v, want %+v", c, w)
		}
	}
}

func TestUndeclaredEmitIsRefused(t *testing.T) {
	r, _ := RoleNamed(handlers.RolePlanner)
	h := r.checkEmits(func(ctx context.Context, in event.Event) ([]event.Event, error) {
		out, err := events.Child(in, "x", events.TypeGroupJoined, map[string]string{})
		return []event.Event{out}, err
	})
	in, _ := events.New("in", events.TypePlanRequested, events.Meta{Tenant: "acme"}, map[string]string{})
	outs, err := h(context.Background(), in)
	if !events.IsPermanent(err) || !strings.Contains(err.Error(), "planner emitted io.agentbus.group.joined") || len(outs) != 0 {
		t.Fatalf("outs %d, err %v; want the undeclared output refused", len(outs), err)
	}
	if errors.Is(err, events.ErrUnknownType) {
		t.Error("wrong error class")
	}
}

// TestOnlyTheProjectorReadsTrails: the projector's consumer is the one
// read one process at a time, cumulatively acknowledged, and it flushes
// its batch at a run's end; every other role reads its events.
func TestOnlyTheProjectorReadsTrails(t *testing.T) {
	for _, r := range Roles {
		projector := r.Name == handlers.RoleProjector
		if r.ReadsTrails() != projector || r.Consumer().Single != projector || (r.FlushOn != nil) != projector {
			t.Errorf("%s: reads trails %v, single consumer %v, flushes %v", r.Name, r.ReadsTrails(), r.Consumer().Single, r.FlushOn != nil)
		}
	}
}
