package runclient_test

import (
	"net"
	"sync"
	"testing"
	"time"

	"github.com/cloudevents/sdk-go/v2/event"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/agentbus/agentbus/events"
	"github.com/agentbus/agentbus/events/eventstest"
	"github.com/agentbus/agentbus/orch"
	"github.com/agentbus/agentbus/runclient"
)

// TestResultAfterTheServerRestarted: the server that holds the client's
// consumer stops and starts again on its store (the consumer, kept in
// memory, is gone); a run that finishes afterwards still answers its
// waiter, and a result stored before the restart is not handed over twice.
func TestResultAfterTheServerRestarted(t *testing.T) {
	if testing.Short() {
		t.Skip("restarts the NATS server and waits for the client to find its consumer gone (about 10 s): make test runs it, -short does not")
	}
	dir := t.TempDir()
	s, err := events.RunServer(events.ServerConfig{Port: -1, StoreDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Shutdown() })
	nc, err := nats.Connect(s.ClientURL(), nats.MaxReconnects(-1), nats.ReconnectWait(50*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	js, _ := jetstream.New(nc)
	ctx := testCtx(t)
	if err := events.Bootstrap(ctx, js, eventstest.TestTopology()); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var errs []error
	c, err := runclient.New(ctx, js, runclient.Config{Source: "test", OnError: func(err error) { mu.Lock(); errs = append(errs, err); mu.Unlock() }})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	type asked struct {
		ev  event.Event
		req orch.RunRequest
	}
	requests := make(chan asked, 2)
	fakeRouter(t, nc, func(ev event.Event, req orch.RunRequest) { requests <- asked{ev, req} })

	answer := func(id, response string) orch.RunResult {
		t.Helper()
		var p *runclient.Pending
		for {
			// Through the restart, a publish may fail: the run id is its
			// message id, so a retry stores one request.
			if p, err = c.Submit(ctx, request(id)); err == nil {
				break
			}
			if ctx.Err() != nil {
				t.Fatal(err)
			}
			time.Sleep(50 * time.Millisecond)
		}
		defer p.Close()
		a := <-requests
		finish(t, js, a.ev, a.req, "1", response)
		res, err := p.Wait(ctx)
		if err != nil {
			mu.Lock()
			defer mu.Unlock()
			t.Fatalf("run %s: %v (consumer errors: %v)", id, err, errs)
		}
		return res
	}
	if res := answer("before", "before the restart"); res.Response != "before the restart" {
		t.Fatalf("first run answered %+v", res)
	}
	port := s.Addr().(*net.TCPAddr).Port
	s.Shutdown()
	s.WaitForShutdown()
	if s, err = events.RunServer(events.ServerConfig{Port: port, StoreDir: dir}); err != nil {
		t.Fatal(err)
	}
	if res := answer("after", "after the restart"); res.RunID != "after" || res.Response != "after the restart" {
		t.Fatalf("run after the restart answered %+v", res)
	}
}
