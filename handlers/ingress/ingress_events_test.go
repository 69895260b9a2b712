package ingress_test

import (
	"net/http"
	"testing"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/agentbus/agentbus/agents"
	"github.com/agentbus/agentbus/events"
	"github.com/agentbus/agentbus/handlers/ingress"
	"github.com/agentbus/agentbus/handlers/internal/handlerstest"
	"github.com/agentbus/agentbus/orch"
)

// TestIngressInboundEventsStartTriggeredRuns: POST /agent/events evaluates
// the tenant's triggers and starts a run as the agent of the first match
// in priority order (skipping a disabled trigger and an inactive agent),
// once per event id; no match starts nothing.
func TestIngressInboundEventsStartTriggeredRuns(t *testing.T) {
	env := handlerstest.NewEnv(t)
	srv := handlerstest.NewIngressServer(t, env, ingress.IngressConfig{})
	ctx := handlerstest.Ctx(t)
	const tenant = "acme"
	support := handlerstest.Call(t, srv, tenant, "POST", "/agent/agents", `{"name":"Support","system_prompt":"Help."}`).Want(t, "agent", http.StatusCreated).Str("agent_id")
	sales := handlerstest.Call(t, srv, tenant, "POST", "/agent/agents", `{"name":"Sales","system_prompt":"Sell."}`).Want(t, "agent", http.StatusCreated).Str("agent_id")
	drafty := handlerstest.Call(t, srv, tenant, "POST", "/agent/agents", `{"name":"Draft","system_prompt":"x","status":"draft"}`).Want(t, "agent", http.StatusCreated).Str("agent_id")
	trigger := func(name, agent, prio, conds string) string {
		return handlerstest.Call(t, srv, tenant, "POST", "/agent/triggers", `{"name":"`+name+`","agent_id":"`+agent+`","event_type":"message.new","priority":`+
			prio+`,"conditions":`+conds+`}`).Want(t, "trigger "+name, http.StatusCreated).Str("trigger_id")
	}
	help := `{"all":[{"field":"message.direction","operator":"eq","value":"inbound"}],"any":[{"field":"message.text","operator":"contains","value":"help"}]}`
	off := trigger("disabled", sales, "0", help)
	handlerstest.Call(t, srv, tenant, "POST", "/agent/triggers/"+off+"/disable", "").Want(t, "disable", http.StatusOK)
	trigger("draft agent", drafty, "1", help)
	helpTrigger := trigger("help", support, "10", help)
	trigger("anything", sales, "50", `{}`)

	post := func(body string) handlerstest.DefResponse {
		return handlerstest.Call(t, srv, tenant, "POST", "/agent/events", body)
	}
	res := post(`{"event_id":"evt-1","event_type":"message.new","user_id":"u1","session_id":"s1",
		"data":{"message":{"direction":"inbound","text":"I need help with an order"}}}`).Want(t, "matching event", http.StatusAccepted)
	if res.Body["matched"] != true || res.Str("trigger_id") != helpTrigger || res.Str("agent_id") != support || res.Body["triggers_evaluated"] != float64(4) {
		t.Fatalf("answer %v, want the help trigger's run", res.Body)
	}
	runID := res.Str("run_id")
	if res.Str("plan_id") != orch.PlanID(runID) {
		t.Fatalf("plan id %s of run %s", res.Str("plan_id"), runID)
	}
	stream, err := env.JS.Stream(ctx, events.StreamAgent)
	if err != nil {
		t.Fatal(err)
	}
	last, err := stream.GetLastMsgForSubject(ctx, "agent.run.requested."+tenant)
	if err != nil {
		t.Fatalf("no run.requested: %v", err)
	}
	ev, err := events.FromMsg(last.Header, last.Data)
	if err != nil {
		t.Fatal(err)
	}
	req := handlerstest.Decode[orch.RunRequest](t, ev)
	if req.RunID != runID || req.AgentID != support || req.Message != "I need help with an order" || req.UserID != "u1" || req.SessionID != "s1" {
		t.Fatalf("run requested %+v", req)
	}
	if req.TriggerID != helpTrigger {
		t.Fatalf("run requested with trigger %q, want %q (its execution record's trigger)", req.TriggerID, helpTrigger)
	}
	// The same event again is the same run, dropped by the stream.
	again := post(`{"event_id":"evt-1","event_type":"message.new","user_id":"u1","session_id":"s1",
		"data":{"message":{"direction":"inbound","text":"I need help with an order"}}}`).Want(t, "retried event", http.StatusAccepted)
	if again.Str("run_id") != runID || again.Body["duplicate"] != true {
		t.Fatalf("retried event started run %s, want %s", again.Str("run_id"), runID)
	}
	info, err := stream.Info(ctx, jetstream.WithSubjectFilter("agent.run.requested."+tenant))
	if err != nil {
		t.Fatal(err)
	}
	if n := info.State.Subjects["agent.run.requested."+tenant]; n != 1 {
		t.Fatalf("%d run.requested stored, want 1", n)
	}

	// Without "help" the catch-all matches; another type matches nothing.
	other := post(`{"event_type":"message.new","session_id":"s2","message":"price list?","data":{"message":{"direction":"inbound","text":"price list?"}}}`).
		Want(t, "catch-all", http.StatusAccepted)
	if other.Str("agent_id") != sales || other.Str("run_id") == runID {
		t.Fatalf("catch-all answer %v", other.Body)
	}
	none := post(`{"event_type":"webhook","session_id":"s3","message":"x","data":{}}`).Want(t, "no trigger", http.StatusOK)
	if none.Body["matched"] != false || none.Str("run_id") != "" {
		t.Fatalf("unmatched answer %v", none.Body)
	}
	post(`{"event_type":"message.deleted","session_id":"s3","message":"x"}`).
		Want(t, "bad event type", http.StatusBadRequest, agents.CodeInvalidEventType, "event_type")
	post(`{"event_type":"message.new","session_id":"s3","data":{"message":{"direction":"inbound","text":"help"}},"extra":1}`).
		Want(t, "unknown field", http.StatusBadRequest, "unknown_field")
	post(`{"event_type":"message.new","session_id":"s 3","data":{"message":{"direction":"inbound","text":"help"}}}`).
		Want(t, "bad session", http.StatusBadRequest, "invalid_request")
	// Another tenant's triggers never see the event.
	if b := handlerstest.Call(t, srv, "beta", "POST", "/agent/events", `{"event_type":"message.new","session_id":"s1","data":{"message":{"direction":"inbound","text":"help"}}}`).
		Want(t, "beta's event", http.StatusOK); b.Body["matched"] != false || b.Body["triggers_evaluated"] != float64(0) {
		t.Fatalf("beta's event %v", b.Body)
	}
}
