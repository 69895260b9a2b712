package app

import (
	"context"
	"net"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"

	"github.com/agentbus/agentbus/events"
	"github.com/agentbus/agentbus/handlers"
	"github.com/agentbus/agentbus/orch"
)

// TestRolesStartThroughNATSRestart: a process whose NATS goes away after
// the bootstrap but before its consumers are set up (a restart of
// nats-server while the process starts) waits for NATS instead of exiting.
// Found by `make chaos`: an executor restarted just before a nats-server
// restart exited with "credentials bucket: context deadline exceeded".
func TestRolesStartThroughNATSRestart(t *testing.T) {
	if testing.Short() {
		t.Skip("keeps NATS down for 2 s under a starting process: make test runs it, -short does not")
	}
	dir := t.TempDir()
	start := func(port int) *server.Server {
		ns, err := events.RunServer(events.ServerConfig{Port: port, StoreDir: dir})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { ns.Shutdown(); ns.WaitForShutdown() })
		return ns
	}
	ns := start(-1)
	port := ns.Addr().(*net.TCPAddr).Port
	c := &Config{NATSURL: ns.ClientURL(), SkillServiceURL: "http://127.0.0.1:1/tenants/{tenant}/mcp"}
	fillDefaults(c)
	c.AckWait, c.Concurrency = 2*time.Second, 1
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	d, err := Connect(ctx, "startup-test", c, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()

	ns.Shutdown()
	ns.WaitForShutdown()
	errc := make(chan error, 1)
	go func() { errc <- d.RunRoles(ctx, handlers.RoleAggregator) }()
	select {
	case err := <-errc:
		t.Fatalf("RunRoles gave up while NATS was restarting: %v", err)
	case <-time.After(2 * time.Second):
	}
	start(port)

	// The aggregator consumes once NATS is back: a step.finished of a
	// two-member group shows up in the fanin bucket.
	nc, err := nats.Connect(c.NATSURL)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	ev, err := events.New("step-finished-1", events.TypeStepFinished, events.Meta{Tenant: "demo", Run: "run-1"},
		orch.StepFinished{Group: orch.Group{ID: "grp-startup", Expected: 2}, Run: orch.RunState{
			Request: orch.RunRequest{RunID: "run-1", TenantID: "demo", UserID: "u", SessionID: "s", Message: "m"},
			Plan:    orch.Plan{PlanID: "plan-1", Status: orch.PlanExecuting, Steps: []orch.Step{{Index: 1, Task: "t", Status: orch.StepRunning}}}, Seq: 2},
			Result: orch.StepResult{Step: 1, Outcome: orch.OutcomeComplete}})
	if err != nil {
		t.Fatal(err)
	}
	pctx, pcancel := context.WithTimeout(ctx, 10*time.Second)
	defer pcancel()
	if err := retry(pctx, func() error { return events.Publish(pctx, js, ev) }); err != nil {
		t.Fatal(err)
	}
	fanin, err := js.KeyValue(pctx, handlers.BucketFanin)
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		if _, err := fanin.Get(pctx, "grp.grp-startup"); err == nil {
			break
		}
		select {
		case err := <-errc:
			t.Fatalf("RunRoles returned: %v", err)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatal("the aggregator did not consume after NATS came back")
		}
		time.Sleep(50 * time.Millisecond)
	}
	cancel()
	if err := <-errc; err != nil {
		t.Fatalf("RunRoles: %v", err)
	}
}
