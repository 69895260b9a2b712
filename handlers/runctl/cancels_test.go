package runctl_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/agentbus/agentbus/handlers/internal/handlerstest"
	"github.com/agentbus/agentbus/handlers/runctl"
	"github.com/agentbus/agentbus/orch"
)

func TestCancelsFollowTheBucket(t *testing.T) {
	env := handlerstest.NewEnv(t)
	ctx := handlerstest.Ctx(t)
	c := handlerstest.StartCancels(t, env)
	if _, ok := c.Lookup(handlerstest.Tenant, "run-a"); ok {
		t.Fatal("run-a cancelled before any request")
	}
	watched, release := c.Watch(ctx, handlerstest.Tenant, "run-a")
	defer release()

	asked := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	first, err := c.Request(ctx, handlerstest.Tenant, "run-a", runctl.Cancel{By: "u1", At: asked})
	if err != nil || !first {
		t.Fatalf("Request = %v, %v; want the first request recorded", first, err)
	}
	select {
	case <-watched.Done():
		if !errors.Is(context.Cause(watched), runctl.ErrRunCancelled) {
			t.Errorf("watched context ended with %v, want ErrRunCancelled", context.Cause(watched))
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the work in flight of run-a was not stopped")
	}
	if got, ok := c.Lookup(handlerstest.Tenant, "run-a"); !ok || got.By != "u1" || !got.At.Equal(asked) {
		t.Errorf("Lookup = %+v, %v", got, ok)
	}
	if again, err := c.Request(ctx, handlerstest.Tenant, "run-a", runctl.Cancel{By: "u2"}); err != nil || again {
		t.Errorf("second Request = %v, %v; want the first one kept", again, err)
	}
	if _, ok := c.Lookup("acme", "run-a"); ok {
		t.Error("another tenant's run of the same id is cancelled")
	}
	if w, release := c.Watch(ctx, handlerstest.Tenant, "run-a"); !errors.Is(context.Cause(w), runctl.ErrRunCancelled) {
		t.Error("Watch of a cancelled run must return a cancelled context")
		release()
	}

	// Any NATS client cancels a run by writing its key, with any value.
	if _, err := env.Cancels.Put(ctx, handlerstest.Tenant+".run-b", nil); err != nil {
		t.Fatal(err)
	}
	handlerstest.WaitFor(t, "run-b's cancel", func() bool { _, ok := c.Lookup(handlerstest.Tenant, "run-b"); return ok })
	if got, _ := c.Lookup(handlerstest.Tenant, "run-b"); got.At.IsZero() {
		t.Error("a cancel without a time must take its entry's")
	}

	// A process started later loads the stored cancels before it starts.
	later := handlerstest.StartCancels(t, env)
	for _, run := range []string{"run-a", "run-b"} {
		if _, ok := later.Lookup(handlerstest.Tenant, run); !ok {
			t.Errorf("a Cancels started later misses %s", run)
		}
	}
	if err := env.Cancels.Delete(ctx, handlerstest.Tenant+".run-b"); err != nil {
		t.Fatal(err)
	}
	handlerstest.WaitFor(t, "run-b's cancel to be withdrawn", func() bool { _, ok := c.Lookup(handlerstest.Tenant, "run-b"); return !ok })

	if _, err := c.Request(ctx, handlerstest.Tenant, "run.*", runctl.Cancel{}); !errors.Is(err, orch.ErrInvalidRequest) {
		t.Errorf("a run id that is no subject token: err = %v", err)
	}
	var none *runctl.Cancels
	if _, ok := none.Lookup(handlerstest.Tenant, "run-a"); ok {
		t.Error("a nil Cancels cancels runs")
	}
}
