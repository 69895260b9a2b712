package runclient_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
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

func newClient(t *testing.T) (*runclient.Client, *nats.Conn, jetstream.JetStream) {
	t.Helper()
	_, nc, js := eventstest.Bootstrap(t, eventstest.TestTopology())
	c, err := runclient.New(testCtx(t), js, runclient.Config{Source: "test"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c, nc, js
}

// TestRunAwaitsItsOwnResult: concurrent runs share the client's one
// consumer and each gets the result of its own run, even when another
// run's result and a duplicate of its own arrive too.
func TestRunAwaitsItsOwnResult(t *testing.T) {
	c, nc, js := newClient(t)
	var mu sync.Mutex
	sources := map[string]string{}
	fakeRouter(t, nc, func(ev event.Event, req orch.RunRequest) {
		mu.Lock()
		sources[req.RunID] = ev.Source()
		mu.Unlock()
		finish(t, js, ev, orch.RunRequest{RunID: "not-awaited", TenantID: req.TenantID, SessionID: req.SessionID}, "other", "nobody's")
		finish(t, js, ev, req, "1", "answer of "+req.RunID)
		finish(t, js, ev, req, "2", "duplicate of "+req.RunID)
	})
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Go(func() {
			id := fmt.Sprintf("run-%d", i)
			res, err := c.Run(testCtx(t), request(id))
			if err != nil {
				t.Errorf("Run(%s): %v", id, err)
				return
			}
			if res.RunID != id || res.Response != "answer of "+id || res.TerminalCode != orch.CodeSuccess {
				t.Errorf("Run(%s) = %+v, want its own first result", id, res)
			}
		})
	}
	wg.Wait()
	for id, src := range sources {
		if src != "agentbus/test" {
			t.Errorf("run.requested of %s has source %q, want agentbus/test", id, src)
		}
	}
	if len(sources) != 8 {
		t.Errorf("%d run.requested seen, want 8", len(sources))
	}
}

// TestWaitEndsWithItsContext: a run nobody answers waits until its context
// ends; the run's waiter is then gone, so its id can be awaited again.
func TestWaitEndsWithItsContext(t *testing.T) {
	c, _, _ := newClient(t)
	ctx, cancel := context.WithTimeout(testCtx(t), 200*time.Millisecond)
	defer cancel()
	_, err := c.Run(ctx, request("run-slow"))
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Run = %v, want context.DeadlineExceeded", err)
	}
	p, err := c.Submit(testCtx(t), request("run-slow"))
	if err != nil {
		t.Fatalf("Submit after the first wait ended: %v", err)
	}
	p.Close()
}

// TestSubmitRefuses: a request without a run id, and a run id still
// awaited.
func TestSubmitRefuses(t *testing.T) {
	c, _, _ := newClient(t)
	if _, err := c.Submit(testCtx(t), request("")); err == nil {
		t.Error("Submit without a run id succeeded")
	}
	p, err := c.Submit(testCtx(t), request("run-twice"))
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	if _, err := c.Submit(testCtx(t), request("run-twice")); !errors.Is(err, runclient.ErrAwaited) {
		t.Errorf("second Submit = %v, want ErrAwaited", err)
	}
}

// TestCloseEndsWaits: Close wakes every Wait with ErrClosed and refuses
// new submissions.
func TestCloseEndsWaits(t *testing.T) {
	c, _, _ := newClient(t)
	p, err := c.Submit(testCtx(t), request("run-closed"))
	if err != nil {
		t.Fatal(err)
	}
	errc := make(chan error, 1)
	waiting := &doneAsked{Context: testCtx(t), asked: make(chan struct{})}
	go func() { _, err := p.Wait(waiting); errc <- err }()
	<-waiting.asked // Wait is in its select
	c.Close()
	c.Close()
	select {
	case err := <-errc:
		if !errors.Is(err, runclient.ErrClosed) {
			t.Errorf("Wait = %v, want ErrClosed", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Wait did not return after Close")
	}
	p.Close()
	if _, err := c.Submit(testCtx(t), request("run-after")); !errors.Is(err, runclient.ErrClosed) {
		t.Errorf("Submit after Close = %v, want ErrClosed", err)
	}
}

// doneAsked is a context that tells when its Done channel is first asked
// for: a Wait asks as it enters its select.
type doneAsked struct {
	context.Context
	once  sync.Once
	asked chan struct{}
}

func (c *doneAsked) Done() <-chan struct{} {
	c.once.Do(func() { close(c.asked) })
	return c.Context.Done()
}

// TestResultBeforeWait: a result that arrives between Submit and Wait
// is kept for the Wait.
func TestResultBeforeWait(t *testing.T) {
	c, nc, js := newClient(t)
	answered := make(chan struct{})
	fakeRouter(t, nc, func(ev event.Event, req orch.RunRequest) {
		finish(t, js, ev, req, "1", "early")
		close(answered)
	})
	p, err := c.Submit(testCtx(t), request("run-early"))
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	<-answered
	deadline := time.Now().Add(5 * time.Second)
	for !p.Arrived() { // the consumer has delivered it
		if time.Now().After(deadline) {
			t.Fatal("the result never reached the pending run")
		}
		time.Sleep(5 * time.Millisecond)
	}
	res, err := p.Wait(testCtx(t))
	if err != nil || res.Response != "early" {
		t.Fatalf("Wait = %+v, %v; want the result that came first", res, err)
	}
}

// TestARequestThatAnsweredARunGetsThatRunsResult: a request whose message
// answered another run's question starts no run of its own; the answered
// run's results (its parked notice, its result) name it among those they
// answer, and its waiter gets them as the answered run's own waiter does.
func TestARequestThatAnsweredARunGetsThatRunsResult(t *testing.T) {
	c, nc, js := newClient(t)
	fakeRouter(t, nc, func(ev event.Event, req orch.RunRequest) {
		if req.RunID != "run-answer" {
			return
		}
		// The answered run asks again, then ends.
		parked, err := events.Child(ev, "parked", events.TypeRunParked, orch.RunParked{RunID: "run-asked", TenantID: req.TenantID,
			SessionID: req.SessionID, Status: orch.PlanAwaitingGate, Gate: orch.GatePacket{Gate: "gate-2", Kind: orch.GateClarify,
				Question: &orch.Question{Text: "Which month?"}}, Answered: []string{"run-answer"}})
		if err == nil {
			err = events.Publish(context.Background(), js, parked)
		}
		if err != nil {
			t.Error(err)
		}
	})
	p, err := c.Submit(testCtx(t), request("run-answer"))
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	res, err := p.Wait(testCtx(t))
	if err != nil || res.RunID != "run-asked" || !runclient.Parked(res) || !strings.Contains(res.Response, "The run asks: Which month?") {
		t.Fatalf("Wait = %+v, %v; want the answered run's new question", res, err)
	}
}
