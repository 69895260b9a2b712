package app

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/cloudevents/sdk-go/v2/event"

	"github.com/agentbus/agentbus/events"
)

func TestRolesAreConsistent(t *testing.T) {
	if err := CheckRoles(Roles); err != nil {
		t.Fatal(err)
	}
	// Every orchestration type is consumed by exactly the roles whose
	// routes name it.
	for _, typ := range []string{events.TypeRunRequested, events.TypePlanRequested, events.TypePlanProposed,
		events.TypeStepRequested, events.TypeStepIterated, events.TypeStepFinished, events.TypeGroupJoined, events.TypeDeadLettered} {
		if !slices.ContainsFunc(Roles, func(r Role) bool { return r.consumes(typ) }) {
			t.Errorf("no role consumes %s", typ)
		}
	}
}

func TestUndeclaredEmitFailsStartup(t *testing.T) {
	roles := slices.Clone(Roles)
	i := slices.IndexFunc(roles, func(r Role) bool { return r.Name == events.RoleAggregator })
	roles[i].Emits = append(slices.Clone(roles[i].Emits), "io.agentbus.group.exploded")
	err := CheckRoles(roles)
	if err == nil || !strings.Contains(err.Error(), "aggregator emits io.agentbus.group.exploded, which no role consumes") {
		t.Fatalf("CheckRoles = %v, want the undeclared type named", err)
	}

	// A role whose routes and consumer filters disagree.
	roles = slices.Clone(Roles)
	i = slices.IndexFunc(roles, func(r Role) bool { return r.Name == events.RolePlanner })
	roles[i].Routes = append(slices.Clone(roles[i].Routes), roles[slices.IndexFunc(roles, func(r Role) bool { return r.Name == events.RoleAggregator })].Routes...)
	if err := CheckRoles(roles); err == nil || !strings.Contains(err.Error(), "planner: consumer filters") {
		t.Fatalf("CheckRoles = %v, want the filter mismatch named", err)
	}
}

func TestUndeclaredEmitIsRefused(t *testing.T) {
	r, _ := RoleNamed(events.RolePlanner)
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
