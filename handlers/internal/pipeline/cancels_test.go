package pipeline

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/agentbus/agentbus/handlers/runctl"
	"github.com/agentbus/agentbus/orch"
)

// startCancels returns the cancels of env's bucket, followed until the
// test ends.
func startCancels(t *testing.T, env *testEnv) *runctl.Cancels {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	c := runctl.NewCancels(env.cancels)
	if err := c.Start(ctx); err != nil {
		t.Fatalf("Start: %v", err)
	}
	return c
}

// cancelRun requests the cancel of run and waits until c has seen it.
func cancelRun(t *testing.T, c *runctl.Cancels, tenant, run string) {
	t.Helper()
	if _, err := c.Request(testCtx(t), tenant, run, runctl.Cancel{By: testUser, At: time.Now().UTC()}); err != nil {
		t.Fatalf("Request: %v", err)
	}
	waitFor(t, "the cancel of "+run, func() bool { _, ok := c.Lookup(tenant, run); return ok })
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestCancelsFollowTheBucket(t *testing.T) {
	env := newEnv(t)
	ctx := testCtx(t)
	c := startCancels(t, env)
	if _, ok := c.Lookup(testTenant, "run-a"); ok {
		t.Fatal("run-a cancelled before any request")
	}
	watched, release := c.Watch(ctx, testTenant, "run-a")
	defer release()

	asked := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	first, err := c.Request(ctx, testTenant, "run-a", runctl.Cancel{By: "u1", At: asked})
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
	if got, ok := c.Lookup(testTenant, "run-a"); !ok || got.By != "u1" || !got.At.Equal(asked) {
		t.Errorf("Lookup = %+v, %v", got, ok)
	}
	if again, err := c.Request(ctx, testTenant, "run-a", runctl.Cancel{By: "u2"}); err != nil || again {
		t.Errorf("second Request = %v, %v; want the first one kept", again, err)
	}
	if _, ok := c.Lookup("acme", "run-a"); ok {
		t.Error("another tenant's run of the same id is cancelled")
	}
	if w, release := c.Watch(ctx, testTenant, "run-a"); !errors.Is(context.Cause(w), runctl.ErrRunCancelled) {
		t.Error("Watch of a cancelled run must return a cancelled context")
		release()
	}

	// Any NATS client cancels a run by writing its key, with any value.
	if _, err := env.cancels.Put(ctx, testTenant+".run-b", nil); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "run-b's cancel", func() bool { _, ok := c.Lookup(testTenant, "run-b"); return ok })
	if got, _ := c.Lookup(testTenant, "run-b"); got.At.IsZero() {
		t.Error("a cancel without a time must take its entry's")
	}

	// A process started later loads the stored cancels before it starts.
	later := startCancels(t, env)
	for _, run := range []string{"run-a", "run-b"} {
		if _, ok := later.Lookup(testTenant, run); !ok {
			t.Errorf("a Cancels started later misses %s", run)
		}
	}
	if err := env.cancels.Delete(ctx, testTenant+".run-b"); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "run-b's cancel to be withdrawn", func() bool { _, ok := c.Lookup(testTenant, "run-b"); return !ok })

	if _, err := c.Request(ctx, testTenant, "run.*", runctl.Cancel{}); !errors.Is(err, orch.ErrInvalidRequest) {
		t.Errorf("a run id that is no subject token: err = %v", err)
	}
	var none *runctl.Cancels
	if _, ok := none.Lookup(testTenant, "run-a"); ok {
		t.Error("a nil Cancels cancels runs")
	}
}
