package runclient_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/cloudevents/sdk-go/v2/event"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/agentbus/agentbus/events"
	"github.com/agentbus/agentbus/orch"
)

func testCtx(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// fakeRouter answers every run.requested by calling answer with the
// request and its event; answer publishes what it wants. The test's end
// waits for every answer.
func fakeRouter(t *testing.T, nc *nats.Conn, answer func(ev event.Event, req orch.RunRequest)) {
	t.Helper()
	var answers sync.WaitGroup
	sub, err := nc.Subscribe("agent.run.requested.*", func(m *nats.Msg) {
		ev, err := events.FromMsg(m.Header, m.Data)
		if err != nil {
			t.Error(err)
			return
		}
		var req orch.RunRequest
		if err := events.Decode(ev, &req); err != nil {
			t.Error(err)
			return
		}
		answers.Go(func() { answer(ev, req) })
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sub.Unsubscribe(); answers.Wait() })
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
}

// finish publishes the run.finished of req (key tells copies apart).
func finish(t *testing.T, js jetstream.JetStream, ev event.Event, req orch.RunRequest, key, response string) {
	fin, err := events.Child(ev, "run.finished/"+key, events.TypeRunFinished, orch.RunResult{
		RunID: req.RunID, TenantID: req.TenantID, SessionID: req.SessionID, PlanID: "plan-" + req.RunID,
		Status: orch.PlanComplete, TerminalCode: orch.CodeSuccess, Response: response})
	if err == nil {
		err = events.Publish(context.Background(), js, fin)
	}
	if err != nil {
		t.Error(err)
	}
}

func request(id string) orch.RunRequest {
	return orch.RunRequest{RunID: id, TenantID: "acme", UserID: "u1", SessionID: "s1", Message: "rank the outlets"}
}
