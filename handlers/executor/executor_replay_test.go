package executor_test

import (
	"bytes"
	"strings"
	"testing"

	"github.com/cloudevents/sdk-go/v2/event"

	"github.com/agentbus/agentbus/events"
	"github.com/agentbus/agentbus/handlers/internal/handlerstest"
	"github.com/agentbus/agentbus/llm/offline"
	"github.com/agentbus/agentbus/skills/demo"
)

// TestExecutorRedeliveryReemitsSkillAudit: when a turn of a call with
// side effects had its outputs never stored (NATS went down after the skill call was recorded, before
// the publish), the redelivery reuses the recorded result and emits the
// call's skill.called audit event again, with the same id and payload, so
// the trace keeps exactly one record of the side effect. Found by
// `make chaos`: traces lacked skill.called after a NATS restart.
func TestExecutorRedeliveryReemitsSkillAudit(t *testing.T) {
	env := handlerstest.NewEnvWith(t, localWriteOutlets())
	x := handlerstest.NewExecutor(env, offline.New(), env.Toolcalls)
	ev := handlerstest.NewEvent(t, "step-lost-outputs", events.TypeStepRequested, handlerstest.ExecRequest("run-lost-outputs", 1))
	first := handlerstest.HandleStep(t, x, ev)  // its outputs are lost: never published
	second := handlerstest.HandleStep(t, x, ev) // the redelivery
	if n := env.Demo.Calls(demo.SkillOutletList); n != 1 {
		t.Fatalf("outlet_list ran %d times, want 1", n)
	}
	if r := env.Demo.Replays(); len(r) != 0 {
		t.Fatalf("the redelivery reached the Skill Service (replays %v); want the recorded result", r)
	}
	audits := func(outs []event.Event) map[string]event.Event {
		m := map[string]event.Event{}
		for _, o := range outs {
			if strings.HasPrefix(o.Type(), events.TypeAuditPrefix) {
				m[o.ID()] = o
			}
		}
		return m
	}
	a, b := audits(first), audits(second)
	if len(a) == 0 || len(a) != len(b) {
		t.Fatalf("redelivery audit events %v, first delivery %v; want the same", handlerstest.AuditNames(second), handlerstest.AuditNames(first))
	}
	for id, o := range a {
		r, ok := b[id]
		if !ok {
			t.Fatalf("redelivery lacks audit event %s (%s); it has %v", id, o.Type(), handlerstest.AuditNames(second))
		}
		if r.Type() != o.Type() || !bytes.Equal(r.Data(), o.Data()) {
			t.Errorf("audit %s: redelivery %s %s, first %s %s", id, r.Type(), r.Data(), o.Type(), o.Data())
		}
	}
}
