package handlerstest

import (
	"context"
	"testing"
	"time"

	"github.com/agentbus/agentbus/handlers/runctl"
)

// StartCancels returns the cancels of env's bucket, followed until the
// test ends.
func StartCancels(t *testing.T, env *Env) *runctl.Cancels {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	c := runctl.NewCancels(env.Cancels)
	if err := c.Start(ctx); err != nil {
		t.Fatalf("Start: %v", err)
	}
	return c
}

// CancelRun requests the cancel of run and waits until c has seen it.
func CancelRun(t *testing.T, c *runctl.Cancels, tenant, run string) {
	t.Helper()
	if _, err := c.Request(Ctx(t), tenant, run, runctl.Cancel{By: User, At: time.Now().UTC()}); err != nil {
		t.Fatalf("Request: %v", err)
	}
	WaitFor(t, "the cancel of "+run, func() bool { _, ok := c.Lookup(tenant, run); return ok })
}

// WaitFor polls cond until it holds, failing t after 5 seconds.
func WaitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
