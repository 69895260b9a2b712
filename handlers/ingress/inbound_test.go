package ingress_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	json "github.com/go-json-experiment/json/v1"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/agentbus/agentbus/events"
	"github.com/agentbus/agentbus/handlers"
	"github.com/agentbus/agentbus/handlers/ingress"
	"github.com/agentbus/agentbus/handlers/internal/handlerstest"
	"github.com/agentbus/agentbus/handlers/ledger"
	"github.com/agentbus/agentbus/handlers/runctl"
	"github.com/agentbus/agentbus/orch"
	"github.com/agentbus/agentbus/store"
)

// inboundIngress is an ingress serving HTTP and consuming the inbound
// events with cfg.
func inboundIngress(t *testing.T, env *handlerstest.Env, cfg ingress.IngressConfig) *httptest.Server {
	t.Helper()
	ctx := handlerstest.Ctx(t)
	g := ingress.NewIngress(env.JS, env.Store, handlerstest.NopLog, cfg)
	if err := g.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(g.Stop)
	cons, err := events.EnsureConsumer(ctx, env.JS, handlers.InboundConsumer, handlerstest.Topology())
	if err != nil {
		t.Fatal(err)
	}
	run, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- g.ServeInbound(run, cons) }()
	t.Cleanup(func() {
		stop()
		if err := <-done; err != nil {
			t.Error(err)
		}
	})
	srv := httptest.NewServer(g.Handler())
	t.Cleanup(srv.Close)
	return srv
}

// recordedEvaluations reads the trigger.evaluated audit events of tenant
// from the AGENT stream (each a trail of its own), in order, keeping those
// of eventID.
func recordedEvaluations(t *testing.T, js jetstream.JetStream, tenant, eventID string) []ingress.Evaluation {
	t.Helper()
	ctx := handlerstest.Ctx(t)
	cons, err := js.OrderedConsumer(ctx, events.StreamAgent, jetstream.OrderedConsumerConfig{
		FilterSubjects: []string{events.TrailSubject(tenant)}})
	if err != nil {
		t.Fatal(err)
	}
	var out []ingress.Evaluation
	for {
		msg, err := cons.Next(jetstream.FetchMaxWait(300 * time.Millisecond))
		if err != nil {
			return out
		}
		ev, err := events.FromMsg(msg.Headers(), msg.Data())
		if err != nil {
			t.Fatal(err)
		}
		if ev.Type() != events.AuditType(ingress.AuditTriggerEvaluated) {
			continue
		}
		var a events.Audit
		if err := events.Decode(ev, &a); err != nil {
			t.Fatal(err)
		}
		var e ingress.Evaluation
		if err := json.Unmarshal(a.Payload, &e); err != nil {
			t.Fatal(err)
		}
		if a.TaskID != e.EventID {
			t.Fatalf("record's task_id %q, its event %q", a.TaskID, e.EventID)
		}
		if e.EventID == eventID {
			out = append(out, e)
		}
	}
}

// TestInboundLimitedEventIsRetriedLater: an inbound event the tenant's
// concurrency limit refuses is recorded as limited with its Retry-After
// and redelivered after it (not dropped, not dead-lettered); once the
// slot is free it starts its run. A session refusal is recorded and
// acked, as POST /agent/events refuses it.
func TestInboundLimitedEventIsRetriedLater(t *testing.T) {
	if testing.Short() {
		t.Skip("waits for a concurrency lease to expire and a Retry-After to pass (about 3 s): make test runs it, -short does not")
	}
	env := handlerstest.NewEnv(t)
	ctx := handlerstest.Ctx(t)
	limits, err := env.JS.KeyValue(ctx, ledger.BucketLimits)
	if err != nil {
		t.Fatal(err)
	}
	lim := &ledger.Limiter{KV: limits, Config: env.Config, Defaults: ledger.TenantLimits{RequestsPerMinute: 100, ConcurrentRuns: 1},
		LeaseTTL: 1500 * time.Millisecond}
	srv := inboundIngress(t, env, ingress.IngressConfig{Limiter: lim, Sessions: &runctl.Sessions{KV: env.Sessions}})
	const tenant = "acme"
	agent := handlerstest.Call(t, srv, tenant, "POST", "/agent/agents", `{"name":"Support","system_prompt":"Help."}`).Want(t, "agent", http.StatusCreated).Str("agent_id")
	handlerstest.Call(t, srv, tenant, "POST", "/agent/triggers", `{"name":"inbound","agent_id":"`+agent+`","event_type":"message.new",
		"conditions":{"all":[{"field":"message.direction","operator":"eq","value":"inbound"}]}}`).Want(t, "trigger", http.StatusCreated)
	publish := func(id, session string) {
		t.Helper()
		body := `{"event_id":"` + id + `","event_type":"message.new","session_id":"` + session + `",
			"data":{"message":{"direction":"inbound","text":"help"}}}`
		if _, err := env.JS.Publish(ctx, handlers.InboundSubject(tenant), []byte(body)); err != nil {
			t.Fatal(err)
		}
	}
	wait := func(id string, done func([]ingress.Evaluation) bool) []ingress.Evaluation {
		t.Helper()
		deadline := time.Now().Add(15 * time.Second)
		for {
			got := recordedEvaluations(t, env.JS, tenant, id)
			if done(got) {
				return got
			}
			if time.Now().After(deadline) {
				t.Fatalf("evaluations of %s: %+v", id, got)
			}
		}
	}
	started := func(evs []ingress.Evaluation) bool {
		return len(evs) > 0 && evs[len(evs)-1].Outcome == ingress.OutcomeStarted
	}

	publish("lim-1", "s1") // takes the one slot; no router ends it
	first := wait("lim-1", started)
	if len(first) != 1 || first[0].RunID != ingress.InboundRunID(tenant, "lim-1") {
		t.Fatalf("lim-1: %+v", first)
	}
	publish("lim-2", "s2")
	second := wait("lim-2", started) // after the lease of lim-1 expires
	if len(second) < 2 || second[0].Outcome != ingress.OutcomeLimited || second[0].Code != "concurrency_limited" ||
		second[0].RetryAfterSeconds < 1 || second[0].RunID != "" {
		t.Fatalf("lim-2 evaluations %+v, want limited first, then started", second)
	}
	stream, err := env.JS.Stream(ctx, events.StreamAgent)
	if err != nil {
		t.Fatal(err)
	}
	msg, err := stream.GetLastMsgForSubject(ctx, "agent.run.requested."+tenant)
	if err != nil {
		t.Fatal(err)
	}
	ev, err := events.FromMsg(msg.Header, msg.Data)
	if err != nil {
		t.Fatal(err)
	}
	if req := handlerstest.Decode[orch.RunRequest](t, ev); req.RunID != ingress.InboundRunID(tenant, "lim-2") || req.AgentID != agent || req.Message != "help" {
		t.Fatalf("lim-2's run request %+v", req)
	}

	// A completed session takes no run: the refusal is recorded once and
	// the event acked, not retried. (The lease of lim-2 expires first.)
	done, err := json.Marshal(store.Session{SessionID: "s-done", TenantID: tenant, State: orch.SessionCompleted, AgentID: agent})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := env.Sessions.Put(ctx, runctl.SessionKey(tenant, "s-done"), done); err != nil {
		t.Fatal(err)
	}
	publish("lim-3", "s-done")
	refused := wait("lim-3", func(evs []ingress.Evaluation) bool {
		return len(evs) > 0 && evs[len(evs)-1].Outcome != ingress.OutcomeLimited
	})
	if last := refused[len(refused)-1]; last.Outcome != ingress.OutcomeSessionRefused || last.Code != orch.SessionRefusedCompleted || last.RunID != "" {
		t.Fatalf("lim-3 evaluations %+v, want the session's refusal", refused)
	}
	// Acked, not left for a redelivery: the inbound consumer settles with
	// nothing pending, and no evaluation came after the refusal's.
	info, err := env.JS.Consumer(ctx, events.StreamAgent, handlers.RoleInbound)
	if err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		ci, err := info.Info(ctx)
		if err == nil && ci.NumPending == 0 && ci.NumAckPending == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("inbound consumer after every event: %+v, %v", ci, err)
		}
	}
	if again := recordedEvaluations(t, env.JS, tenant, "lim-3"); len(again) != len(refused) {
		t.Fatalf("the refused event was evaluated again: %+v", again)
	}
}
