package handlers_test

import (
	"testing"

	"github.com/agentbus/agentbus/events"
	"github.com/agentbus/agentbus/handlers"
	"github.com/agentbus/agentbus/handlers/internal/handlerstest"
)

// TestOutbox_AuditIDsSurviveATrailThatGainedAnEvent: a redelivered input
// whose trail gained an event of another name (context.loaded, once the
// session has history) emits its other audit events under the ids of the
// first attempt, so the trace keeps one copy of each; two events of one
// name keep distinct ids.
func TestOutbox_AuditIDsSurviveATrailThatGainedAnEvent(t *testing.T) {
	in := handlerstest.NewEvent(t, "run-ids", events.TypeRunRequested, handlerstest.RunRequest("run-ids", "hello"))
	trail := func(names ...string) map[string][]string {
		out := handlers.Outbox{In: in}
		for _, name := range names {
			out.Audit(name, events.Audit{PlanID: "plan-1"}, nil)
		}
		evs, err := out.Result()
		if err != nil {
			t.Fatal(err)
		}
		ids := map[string][]string{}
		for _, ev := range evs {
			ids[events.AuditName(ev.Type())] = append(ids[events.AuditName(ev.Type())], ev.ID())
		}
		return ids
	}
	first := trail("user_message.received", "model.called", "routing.decided", "model.called")
	again := trail("user_message.received", "context.loaded", "model.called", "routing.decided", "model.called")
	for name, ids := range first {
		for i, id := range ids {
			if again[name][i] != id {
				t.Errorf("%s #%d: id %s on the first attempt, %s on the redelivery", name, i+1, id, again[name][i])
			}
		}
	}
	if m := first["model.called"]; m[0] == m[1] {
		t.Fatal("two model.called events share an id")
	}
}
