package main

import (
	"context"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"

	"github.com/agentbus/agentbus/auth"
	"github.com/agentbus/agentbus/cmd/internal/app"
	"github.com/agentbus/agentbus/handlers/ledger"
	"github.com/agentbus/agentbus/handlers/runctl"
)

// TestSetup_AsAdminOnAServerAgentbusDoesNotRun: agentbus setup, as admin
// on a server with per-role users, creates every stream, consumer and
// bucket, so that a role process (which may create none) starts; run again
// it succeeds and changes nothing; a wrong password fails it with exit 1.
func TestSetup_AsAdminOnAServerAgentbusDoesNotRun(t *testing.T) {
	ns, passwords := permissionedServer(t)
	t.Setenv("NATS_URL", ns.ClientURL())
	t.Setenv("NATS_PASSWORD", passwords[app.UserAdmin])
	t.Setenv("ACK_WAIT", "2s")
	for range 2 {
		if code := setup([]string{"--timeout", "30s"}); code != 0 {
			t.Fatalf("agentbus setup exited %d", code)
		}
	}
	admin, err := connectAs(ns.ClientURL(), app.UserAdmin, passwords[app.UserAdmin], nil)
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	ajs, _ := jetstream.New(admin)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, r := range app.Roles {
		c := r.Consumer()
		if _, err := ajs.Consumer(ctx, c.Stream, c.Name); err != nil {
			t.Errorf("consumer %s on %s: %v", c.Name, c.Stream, err)
		}
	}
	for _, b := range append([]string{auth.KeyBucket}, runctl.BucketGates, ledger.BucketBudgets) {
		if _, err := ajs.KeyValue(ctx, b); err != nil {
			t.Errorf("bucket %s: %v", b, err)
		}
	}

	// The executor's user, which may create nothing, finds it all.
	c := app.DefaultConfig()
	c.NATSURL, c.NATSUser, c.NATSPassword, c.AckWait = ns.ClientURL(), "executor", passwords["executor"], 2*time.Second
	d, err := app.Connect(ctx, "executor", c, zerolog.Nop())
	if err != nil {
		t.Fatalf("the executor does not start on the set-up topology: %v", err)
	}
	d.Close()

	t.Setenv("NATS_PASSWORD", "wrong-"+passwords[app.UserAdmin])
	if code := setup([]string{"--timeout", "2s"}); code != 1 {
		t.Fatalf("a wrong password: exit %d, want 1", code)
	}
}
