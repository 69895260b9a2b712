package main

import (
	"context"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	json "github.com/go-json-experiment/json/v1"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/agentbus/agentbus/agents"
	"github.com/agentbus/agentbus/events"
	"github.com/agentbus/agentbus/handlers/ingress"
	"github.com/agentbus/agentbus/store"
)

// evaluations answers GET /agent/events/{event_id} as tenant: the status
// and, on 200, the recorded evaluations.
func evaluations(t *testing.T, base, tenant, eventID string) (int, []ingress.RecordedEvaluation) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, base+"/agent/events/"+eventID, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("X-Tenant-Id", tenant)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out ingress.EventEvaluations
	if resp.StatusCode == http.StatusOK {
		if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
			t.Fatal(err)
		}
	}
	return resp.StatusCode, out.Evaluations
}

// waitEvaluations waits until eventID of tenant has n evaluations and
// returns them, oldest first.
func waitEvaluations(t *testing.T, base, tenant, eventID string, n int) []ingress.RecordedEvaluation {
	t.Helper()
	var got []ingress.RecordedEvaluation
	eventually(t, 15*time.Second, "the evaluations of "+eventID, func() bool {
		_, got = evaluations(t, base, tenant, eventID)
		return len(got) >= n
	})
	if len(got) != n {
		t.Fatalf("%s has %d evaluations, want %d: %+v", eventID, len(got), n, got)
	}
	return got
}

// TestInboundEventsOverNATS: events published on agent.inbound.<tenant>
// (the JSON body POST /agent/events takes) are evaluated by the
// ingress's inbound consumer like POST /agent/events: a match starts one
// run of the first trigger's agent by priority, and the run finishes; a
// non-match starts none; the same event id again starts no second run; a
// malformed event is dead-lettered on its first delivery with its reason
// while the next good one is served. Every evaluation, over NATS or HTTP,
// is recorded and answered by GET /agent/events/{event_id} for its
// tenant only.
func TestInboundEventsOverNATS(t *testing.T) {
	s := startStack(t)
	base := "http://" + s.IngressAddr
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	js := s.Deps.JS
	analyst := createAgent(t, base, "demo", `{"name":"Analyst","system_prompt":"Rank outlets.","tools":["outlet_list","engagement_analytics"]}`)
	backup := createAgent(t, base, "demo", `{"name":"Backup","system_prompt":"Rank outlets too.","tools":["outlet_list","engagement_analytics"]}`)
	inbound := `{"all":[{"field":"message.direction","operator":"eq","value":"inbound"}]}`
	// Both match an inbound message: the lower priority number wins,
	// whatever the order of creation.
	low := post(t, base+"/agent/triggers", "demo", `{"name":"Backup","agent_id":"`+backup+`","event_type":"message.new","priority":50,
		"conditions":`+inbound+`}`, http.StatusCreated)["trigger_id"].(string)
	high := post(t, base+"/agent/triggers", "demo", `{"name":"Ranking","agent_id":"`+analyst+`","event_type":"message.new","priority":10,
		"conditions":`+inbound+`}`, http.StatusCreated)["trigger_id"].(string)

	publish := func(subject, body string) {
		t.Helper()
		if _, err := js.Publish(ctx, subject, []byte(body)); err != nil {
			t.Fatalf("publish on %s: %v", subject, err)
		}
	}
	event := func(id, direction string) string {
		return `{"event_id":"` + id + `","event_type":"message.new","user_id":"u1","session_id":"sess-` + id + `",
			"data":{"message":{"direction":"` + direction + `","text":"List the active outlets and rank them by engagement"}}}`
	}

	// A match: one run of the high-priority trigger's agent, which ends.
	publish("agent.inbound.demo", event("in-1", "inbound"))
	ev := waitEvaluations(t, base, "demo", "in-1", 1)[0]
	if ev.Outcome != ingress.OutcomeStarted || ev.Source != ingress.SourceNATS || ev.TriggerID != high || ev.AgentID != analyst ||
		ev.RunID != ingress.InboundRunID("demo", "in-1") || ev.EventType != agents.EventMessageNew {
		t.Fatalf("evaluation of in-1: %+v", ev)
	}
	if len(ev.Triggers) != 2 || ev.Triggers[0].TriggerID != high || ev.Triggers[1].TriggerID != low ||
		!ev.Triggers[0].Matched || !ev.Triggers[1].Matched {
		t.Fatalf("triggers considered %+v, want both matched, %s (priority 10) first", ev.Triggers, high)
	}
	plan, _ := finalPlan(t, s, "demo", ev.PlanID)
	if plan.Status != store.PlanStatusComplete {
		t.Fatalf("the inbound event's run ended %s", plan.Status)
	}

	// No match: recorded with the failed condition, no run.
	publish("agent.inbound.demo", event("in-2", "outbound"))
	ev = waitEvaluations(t, base, "demo", "in-2", 1)[0]
	if ev.Outcome != ingress.OutcomeNoMatch || ev.RunID != "" || ev.TriggerID != "" || len(ev.Triggers) != 2 {
		t.Fatalf("evaluation of in-2: %+v", ev)
	}
	for _, c := range ev.Triggers {
		if c.Matched || c.Failed != agents.FailedAll || c.Condition == nil || c.Condition.Field != "message.direction" {
			t.Fatalf("in-2's trigger %+v, want failed on message.direction", c)
		}
	}

	// The same event again: evaluated and recorded again as a duplicate
	// of the same run, which is not requested twice.
	publish("agent.inbound.demo", event("in-1", "inbound"))
	again := waitEvaluations(t, base, "demo", "in-1", 2)
	if again[1].RunID != again[0].RunID || again[1].Outcome != ingress.OutcomeDuplicate {
		t.Fatalf("the duplicate's evaluation %+v", again[1])
	}

	// Malformed events are dead-lettered at once; the next good one is
	// served.
	publish("agent.inbound.demo", `{"event_id":"in-bad","event_type":"message.new","session_id":"s","surprise":1}`)
	publish("agent.inbound.demo", `{"event_type":"message.new","session_id":"s"}`)
	publish("agent.inbound.demo", `not json`)
	publish("agent.inbound.b@d", event("in-4", "inbound"))
	publish("agent.inbound.demo", event("in-3", "elsewhere"))
	if ev := waitEvaluations(t, base, "demo", "in-3", 1)[0]; ev.Outcome != ingress.OutcomeNoMatch {
		t.Fatalf("evaluation of in-3 after the malformed events: %+v", ev)
	}
	letters := deadLetters(t, ctx, js, 4)
	wantReasons := []string{"unknown field", "event_id is required", "body:", "names no valid tenant"}
	for i, want := range wantReasons {
		dl := letters[i]
		if !strings.Contains(dl.Reason, want) || dl.Deliveries != 1 || dl.Exhausted || dl.RunID != "" || !strings.HasPrefix(dl.Subject, "agent.inbound.") {
			t.Fatalf("dead letter %d: %+v, want reason with %q on its first delivery", i, dl, want)
		}
	}
	if code, _ := evaluations(t, base, "demo", "in-bad"); code != http.StatusNotFound {
		t.Fatalf("a dead-lettered event has an evaluation: %d", code)
	}

	// One run.requested per started event id: in-1 (twice evaluated).
	stream, err := js.Stream(ctx, events.StreamAgent)
	if err != nil {
		t.Fatal(err)
	}
	info, err := stream.Info(ctx, jetstream.WithSubjectFilter("agent.run.requested.demo"))
	if err != nil {
		t.Fatal(err)
	}
	if n := info.State.Subjects["agent.run.requested.demo"]; n != 1 {
		t.Fatalf("%d run.requested stored, want 1 (in-1's)", n)
	}

	// Per tenant: another tenant's event of the same id is its own, and
	// neither sees the other's.
	publish("agent.inbound.beta", event("in-1", "inbound"))
	beta := waitEvaluations(t, base, "beta", "in-1", 1)[0]
	if beta.Outcome != ingress.OutcomeNoMatch || len(beta.Triggers) != 0 {
		t.Fatalf("beta's evaluation %+v, want no trigger of demo's", beta)
	}
	if _, demo := evaluations(t, base, "demo", "in-1"); len(demo) != 2 {
		t.Fatalf("demo's in-1 has %d evaluations after beta's, want 2", len(demo))
	}
	if code, _ := evaluations(t, base, "beta", "in-2"); code != http.StatusNotFound {
		t.Fatalf("beta reads demo's in-2: %d", code)
	}

	// The HTTP path records its evaluations the same way.
	res := post(t, base+"/agent/events", "demo", `{"event_type":"message.new","session_id":"sess-h","data":{"message":{"direction":"out"}}}`, http.StatusOK)
	id, _ := res["event_id"].(string)
	if ev := waitEvaluations(t, base, "demo", id, 1)[0]; ev.Source != ingress.SourceHTTP || ev.Outcome != ingress.OutcomeNoMatch {
		t.Fatalf("HTTP evaluation %+v", ev)
	}
}

// deadLetters reads the first n dead letters stored on agent.dead.>, in
// stream order.
func deadLetters(t *testing.T, ctx context.Context, js jetstream.JetStream, n int) []events.DeadLetter {
	t.Helper()
	cons, err := js.OrderedConsumer(ctx, events.StreamAgent, jetstream.OrderedConsumerConfig{FilterSubjects: []string{"agent.dead.>"}})
	if err != nil {
		t.Fatal(err)
	}
	var out []events.DeadLetter
	deadline := time.Now().Add(15 * time.Second)
	for len(out) < n && time.Now().Before(deadline) {
		msg, err := cons.Next(jetstream.FetchMaxWait(time.Second))
		if err != nil {
			continue
		}
		ev, err := events.FromMsg(msg.Headers(), msg.Data())
		if err != nil {
			t.Fatal(err)
		}
		var dl events.DeadLetter
		if err := events.Decode(ev, &dl); err != nil {
			t.Fatal(err)
		}
		out = append(out, dl)
	}
	if len(out) != n {
		t.Fatalf("%d dead letters, want %d: %+v", len(out), n, out)
	}
	if i := slices.IndexFunc(out, func(dl events.DeadLetter) bool { return dl.Reason == "" }); i >= 0 {
		t.Fatalf("dead letter %d has no reason", i)
	}
	return out
}
