package pipeline

import (
	"context"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/cloudevents/sdk-go/v2/event"
	json "github.com/go-json-experiment/json/v1"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"

	"github.com/agentbus/agentbus/events"
	"github.com/agentbus/agentbus/events/eventstest"
	"github.com/agentbus/agentbus/handlers"
	"github.com/agentbus/agentbus/handlers/ledger"
	"github.com/agentbus/agentbus/handlers/runctl"
	"github.com/agentbus/agentbus/llm"
	"github.com/agentbus/agentbus/orch"
	"github.com/agentbus/agentbus/skills"
	"github.com/agentbus/agentbus/skills/demo"
	"github.com/agentbus/agentbus/store"
	"github.com/agentbus/agentbus/store/embedded"
)

const (
	testTenant  = "beta"
	testSession = "sess-1"
	testUser    = "user-1"
	rankTask    = "List the active outlets and rank them by engagement"
	// outletIDsShape is step 1's return_spec: what engagement_analytics needs.
	outletIDsShape = `{"type":"object","properties":{"outlet_ids":{"type":"array","items":{"type":"string"}}},"required":["outlet_ids"]}`
	// resultsShape is step 2's return_spec: the ranked results.
	resultsShape = `{"type":"object","properties":{"results":{"type":"array","items":{"type":"object","properties":{` +
		`"outlet_id":{"type":"string"},"name":{"type":"string"},"score":{"type":"number"},"rank":{"type":"integer"}}}}},"required":["results"]}`
)

// testEnv is a real in-process NATS JetStream with the agentbus topology,
// the embedded store on it, and the real demo Skill Service with a real
// MCP client. Nothing here is mocked.
type testEnv struct {
	js        jetstream.JetStream
	st        *embedded.Store
	svc       *demo.Service
	sk        *skills.Client
	fanin     jetstream.KeyValue
	locks     jetstream.KeyValue
	toolcalls jetstream.KeyValue
	config    jetstream.KeyValue
	sessions  jetstream.KeyValue
	cancels   jetstream.KeyValue
	budgets   *ledger.Budgets
	gates     *runctl.Gates
}

func testCtx(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// testTopology is eventstest's with the buckets and object stores the
// roles use.
func testTopology() events.Topology {
	topo := eventstest.TestTopology()
	topo.Buckets, topo.ObjectStores = handlers.Buckets, handlers.ObjectStores
	return topo
}

func newEnv(t *testing.T) *testEnv {
	t.Helper()
	return newEnvWith(t, demo.Config{})
}

// newEnvWith is newEnv with a demo Skill Service configured by skillCfg
// (latency, injected failures).
func newEnvWith(t *testing.T, skillCfg demo.Config) *testEnv {
	t.Helper()
	_, _, js := eventstest.Bootstrap(t, testTopology())
	ctx := testCtx(t)
	st, err := embedded.New(ctx, js, embedded.Config{})
	if err != nil {
		t.Fatalf("embedded.New: %v", err)
	}
	svc := demo.NewService(skillCfg)
	srv := httptest.NewServer(svc.Handler())
	t.Cleanup(srv.Close)
	sk, err := skills.NewClient(skills.Config{URL: srv.URL + "/tenants/{tenant}/mcp"})
	if err != nil {
		t.Fatalf("skills.NewClient: %v", err)
	}
	t.Cleanup(func() { _ = sk.Close() })
	kv := func(name string) jetstream.KeyValue {
		b, err := js.KeyValue(ctx, name)
		if err != nil {
			t.Fatalf("bucket %s: %v", name, err)
		}
		return b
	}
	return &testEnv{js: js, st: st, svc: svc, sk: sk,
		fanin: kv(handlers.BucketFanin), locks: kv(handlers.BucketLocks),
		toolcalls: kv(handlers.BucketToolcalls), config: kv(handlers.BucketConfig), sessions: kv(handlers.BucketSessions), cancels: kv(handlers.BucketCancels),
		budgets: &ledger.Budgets{KV: kv(ledger.BucketBudgets)}, gates: &runctl.Gates{KV: kv(runctl.BucketGates)}}
}

func toolCallResp(id, name, args string) llm.Response {
	return llm.Response{Message: llm.Message{Role: llm.RoleAssistant,
		ToolCalls: []llm.ToolCall{{ID: id, Name: name, Arguments: json.RawMessage(args)}}}}
}

// lastMessage is the content of req's last message.
func lastMessage(req llm.Request) string {
	if len(req.Messages) == 0 {
		return ""
	}
	return req.Messages[len(req.Messages)-1].Content
}

func textResp(content string) llm.Response {
	return llm.Response{Message: llm.Message{Role: llm.RoleAssistant, Content: content}}
}

func runRequest(runID, message string) orch.RunRequest {
	return orch.RunRequest{RunID: runID, TenantID: testTenant, UserID: testUser, SessionID: testSession, Message: message}
}

func newEvent(t *testing.T, id, typ string, data any) event.Event {
	t.Helper()
	ev, err := events.New(id, typ, events.Meta{Tenant: testTenant, Session: testSession, Run: "run-1"}, data)
	if err != nil {
		t.Fatalf("events.New: %v", err)
	}
	return ev
}

func childEvent(t *testing.T, parent event.Event, key, typ string, data any) event.Event {
	t.Helper()
	ev, err := events.Child(parent, key, typ, data)
	if err != nil {
		t.Fatalf("events.Child: %v", err)
	}
	return ev
}

func decode[T any](t *testing.T, ev event.Event) T {
	t.Helper()
	var v T
	if err := events.Decode(ev, &v); err != nil {
		t.Fatalf("decode %s: %v", ev.Type(), err)
	}
	return v
}

// ofType returns the outputs of type typ.
func ofType(outs []event.Event, typ string) []event.Event {
	var got []event.Event
	for _, ev := range outs {
		if ev.Type() == typ {
			got = append(got, ev)
		}
	}
	return got
}

// only returns the single output of type typ.
func only(t *testing.T, outs []event.Event, typ string) event.Event {
	t.Helper()
	got := ofType(outs, typ)
	if len(got) != 1 {
		t.Fatalf("got %d %s events, want 1 (outputs: %v)", len(got), typ, types(outs))
	}
	return got[0]
}

// auditNames returns the short names of the audit outputs, in order.
func auditNames(outs []event.Event) []string {
	var names []string
	for _, ev := range outs {
		if strings.HasPrefix(ev.Type(), events.TypeAuditPrefix) {
			names = append(names, events.AuditName(ev.Type()))
		}
	}
	return names
}

// auditOf returns the decoded audit output named name.
func auditOf(t *testing.T, outs []event.Event, name string) (events.Audit, map[string]any) {
	t.Helper()
	ev := only(t, outs, events.AuditType(name))
	a := decode[events.Audit](t, ev)
	var payload map[string]any
	if len(a.Payload) > 0 {
		if err := json.Unmarshal(a.Payload, &payload); err != nil {
			t.Fatalf("audit %s payload: %v", name, err)
		}
	}
	return a, payload
}

func types(outs []event.Event) []string {
	ts := make([]string, len(outs))
	for i, ev := range outs {
		ts[i] = ev.Type()
	}
	return ts
}

func ids(outs []event.Event) []string {
	s := make([]string, len(outs))
	for i, ev := range outs {
		s[i] = ev.ID()
	}
	return s
}

// checkOutputs asserts what every handler output must satisfy: it is a
// valid CloudEvent that can be published, and it carries the tenant.
func checkOutputs(t *testing.T, outs []event.Event) {
	t.Helper()
	checkOutputsOf(t, outs, testTenant)
}

// checkOutputsOf is checkOutputs for a run of tenant.
func checkOutputsOf(t *testing.T, outs []event.Event, tenant string) {
	t.Helper()
	for _, ev := range outs {
		if _, err := events.ToMsg(ev); err != nil {
			t.Errorf("output %s cannot be published: %v", ev.Type(), err)
		}
		if got := events.MetaOf(ev).Tenant; got != tenant {
			t.Errorf("output %s has tenant %q, want %q", ev.Type(), got, tenant)
		}
	}
}

var nopLog = zerolog.Nop()

// testEmbedder is the offline embedder at the dimension the services use.
var testEmbedder = store.NewHashEmbedder(1536)

func stepIndexes(steps []orch.Step) []int {
	idx := make([]int, len(steps))
	for i, s := range steps {
		idx[i] = s.Index
	}
	return idx
}
