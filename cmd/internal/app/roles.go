package app

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/cloudevents/sdk-go/v2/event"

	"github.com/agentbus/agentbus/events"
	"github.com/agentbus/agentbus/handlers"
)

// Role declares one role: its name, the routes of its handler (the event
// types it consumes, with the methods that handle them) and the event
// types it may emit besides audit events. Consumer filters, dispatch and
// the emit checks derive from it.
type Role struct {
	Name   string
	Routes []events.Route
	Emits  []string
}

// Roles are the roles of agentbus. Routes come from unbuilt handlers: a
// route names its type whatever the handler's dependencies.
var Roles = []Role{
	{events.RoleRouter, (&handlers.Router{}).Routes(),
		[]string{events.TypePlanRequested, events.TypeStepRequested, events.TypeRunFinished, events.TypeReplyChunk}},
	{events.RolePlanner, (&handlers.Planner{}).Routes(), []string{events.TypePlanProposed}},
	{events.RoleExecutor, (&handlers.Executor{}).Routes(), []string{events.TypeStepIterated, events.TypeStepFinished, events.TypeGroupJoined}},
	{events.RoleAggregator, (&handlers.Aggregator{}).Routes(), []string{events.TypeGroupJoined}},
	{events.RoleProjector, (&handlers.Projector{}).Routes(), nil},
}

// IngressConsumes are the types the ingress reads for its callers.
var IngressConsumes = []string{events.TypeRunFinished, events.TypeReplyChunk}

// RoleNamed returns the declaration of role.
func RoleNamed(name string) (Role, bool) {
	i := slices.IndexFunc(Roles, func(r Role) bool { return r.Name == name })
	if i < 0 {
		return Role{}, false
	}
	return Roles[i], true
}

// Filters are the consumer filter subjects the role's routes need.
func (r Role) Filters() []string {
	var f []string
	for _, rt := range r.Routes {
		if s := rt.Filter(); !slices.Contains(f, s) {
			f = append(f, s)
		}
	}
	return f
}

// consumes reports whether any route of the role takes events of typ.
func (r Role) consumes(typ string) bool {
	return slices.ContainsFunc(r.Routes, func(rt events.Route) bool { return rt.Matches(typ) })
}

// CheckRoles reports a declaration that would lose events: a type some
// role emits that no role (nor the ingress) consumes, or a role whose
// consumer filters differ from what its routes need. Every process runs
// it at start.
func CheckRoles(roles []Role) error {
	for _, r := range roles {
		for _, typ := range r.Emits {
			if slices.Contains(IngressConsumes, typ) ||
				slices.ContainsFunc(roles, func(c Role) bool { return c.consumes(typ) }) {
				continue
			}
			return fmt.Errorf("role %s emits %s, which no role consumes: add a route for it to the consuming role", r.Name, typ)
		}
		have, want := events.Filters(r.Name), r.Filters()
		slices.Sort(have)
		slices.Sort(want)
		if !slices.Equal(have, want) {
			return fmt.Errorf("role %s: consumer filters %v, but its routes need %v", r.Name, have, want)
		}
	}
	return nil
}

// checkEmits wraps a role's handler so that an event of a type the role
// does not declare is refused: it would be stored where no role reads it.
func (r Role) checkEmits(h events.Handler) events.Handler {
	return func(ctx context.Context, ev event.Event) ([]event.Event, error) {
		outs, err := h(ctx, ev)
		if err != nil {
			return nil, err
		}
		for _, o := range outs {
			if !strings.HasPrefix(o.Type(), events.TypeAuditPrefix) && !slices.Contains(r.Emits, o.Type()) {
				return nil, events.Permanent(fmt.Errorf("role %s emitted %s, which it does not declare", r.Name, o.Type()))
			}
		}
		return outs, nil
	}
}
