package handlerstest

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

// The run every test starts from: its tenant, session and user, its task,
// and the return_specs of the two steps the offline planner makes of it.
const (
	Tenant   = "beta"
	Session  = "sess-1"
	User     = "user-1"
	RankTask = "List the active outlets and rank them by engagement"
	// OutletIDsShape is step 1's return_spec: what engagement_analytics needs.
	OutletIDsShape = `{"type":"object","properties":{"outlet_ids":{"type":"array","items":{"type":"string"}}},"required":["outlet_ids"]}`
	// ResultsShape is step 2's return_spec: the ranked results.
	ResultsShape = `{"type":"object","properties":{"results":{"type":"array","items":{"type":"object","properties":{` +
		`"outlet_id":{"type":"string"},"name":{"type":"string"},"score":{"type":"number"},"rank":{"type":"integer"}}}}},"required":["results"]}`
)

// Env is a real in-process NATS JetStream with the agentbus topology,
// the embedded store on it, and the real demo Skill Service with a real
// MCP client. Nothing here is mocked.
type Env struct {
	JS        jetstream.JetStream
	Store     *embedded.Store
	Demo      *demo.Service
	Skills    *skills.Client
	Fanin     jetstream.KeyValue
	Locks     jetstream.KeyValue
	Toolcalls jetstream.KeyValue
	Config    jetstream.KeyValue
	Sessions  jetstream.KeyValue
	Cancels   jetstream.KeyValue
	Budgets   *ledger.Budgets
	Gates     *runctl.Gates
}

// Ctx is a context that ends after 30 seconds or with the test.
func Ctx(t testing.TB) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// Topology is eventstest's with the buckets and object stores the
// roles use.
func Topology() events.Topology {
	topo := eventstest.TestTopology()
	topo.Buckets, topo.ObjectStores = handlers.Buckets, handlers.ObjectStores
	return topo
}

// NewEnv starts an Env with the demo Skill Service as it ships.
func NewEnv(t testing.TB) *Env {
	t.Helper()
	return NewEnvWith(t, demo.Config{})
}

// NewEnvWith is NewEnv with a demo Skill Service configured by skillCfg
// (latency, injected failures).
func NewEnvWith(t testing.TB, skillCfg demo.Config) *Env {
	t.Helper()
	_, _, js := eventstest.Bootstrap(t, Topology())
	ctx := Ctx(t)
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
	return &Env{JS: js, Store: st, Demo: svc, Skills: sk,
		Fanin: kv(handlers.BucketFanin), Locks: kv(handlers.BucketLocks),
		Toolcalls: kv(handlers.BucketToolcalls), Config: kv(handlers.BucketConfig), Sessions: kv(handlers.BucketSessions), Cancels: kv(handlers.BucketCancels),
		Budgets: &ledger.Budgets{KV: kv(ledger.BucketBudgets)}, Gates: &runctl.Gates{KV: kv(runctl.BucketGates)}}
}

// ToolCallResp is a model response that makes one tool call.
func ToolCallResp(id, name, args string) llm.Response {
	return llm.Response{Message: llm.Message{Role: llm.RoleAssistant,
		ToolCalls: []llm.ToolCall{{ID: id, Name: name, Arguments: json.RawMessage(args)}}}}
}

// LastMessage is the content of req's last message.
func LastMessage(req llm.Request) string {
	if len(req.Messages) == 0 {
		return ""
	}
	return req.Messages[len(req.Messages)-1].Content
}

// TextResp is a model response with content and no tool call.
func TextResp(content string) llm.Response {
	return llm.Response{Message: llm.Message{Role: llm.RoleAssistant, Content: content}}
}

// RunRequest is a request of run runID by the test user in the test session.
func RunRequest(runID, message string) orch.RunRequest {
	return orch.RunRequest{RunID: runID, TenantID: Tenant, UserID: User, SessionID: Session, Message: message}
}

// NewEvent is an event of run-1 in the test session.
func NewEvent(t *testing.T, id, typ string, data any) event.Event {
	t.Helper()
	ev, err := events.New(id, typ, events.Meta{Tenant: Tenant, Session: Session, Run: "run-1"}, data)
	if err != nil {
		t.Fatalf("events.New: %v", err)
	}
	return ev
}

// ChildEvent is events.Child, failing t on an error.
func ChildEvent(t *testing.T, parent event.Event, key, typ string, data any) event.Event {
	t.Helper()
	ev, err := events.Child(parent, key, typ, data)
	if err != nil {
		t.Fatalf("events.Child: %v", err)
	}
	return ev
}

// Decode is the data of ev as a T, failing t on an error.
func Decode[T any](t *testing.T, ev event.Event) T {
	t.Helper()
	var v T
	if err := events.Decode(ev, &v); err != nil {
		t.Fatalf("decode %s: %v", ev.Type(), err)
	}
	return v
}

// OfType returns the outputs of type typ.
func OfType(outs []event.Event, typ string) []event.Event {
	var got []event.Event
	for _, ev := range outs {
		if ev.Type() == typ {
			got = append(got, ev)
		}
	}
	return got
}

// Only returns the single output of type typ.
func Only(t *testing.T, outs []event.Event, typ string) event.Event {
	t.Helper()
	got := OfType(outs, typ)
	if len(got) != 1 {
		t.Fatalf("got %d %s events, want 1 (outputs: %v)", len(got), typ, Types(outs))
	}
	return got[0]
}

// AuditNames returns the short names of the audit outputs, in order.
func AuditNames(outs []event.Event) []string {
	var names []string
	for _, ev := range outs {
		if strings.HasPrefix(ev.Type(), events.TypeAuditPrefix) {
			names = append(names, events.AuditName(ev.Type()))
		}
	}
	return names
}

// AuditOf returns the decoded audit output named name.
func AuditOf(t *testing.T, outs []event.Event, name string) (events.Audit, map[string]any) {
	t.Helper()
	ev := Only(t, outs, events.AuditType(name))
	a := Decode[events.Audit](t, ev)
	var payload map[string]any
	if len(a.Payload) > 0 {
		if err := json.Unmarshal(a.Payload, &payload); err != nil {
			t.Fatalf("audit %s payload: %v", name, err)
		}
	}
	return a, payload
}

// Types returns the types of outs, in order.
func Types(outs []event.Event) []string {
	ts := make([]string, len(outs))
	for i, ev := range outs {
		ts[i] = ev.Type()
	}
	return ts
}

// IDs returns the ids of outs, in order.
func IDs(outs []event.Event) []string {
	s := make([]string, len(outs))
	for i, ev := range outs {
		s[i] = ev.ID()
	}
	return s
}

// CheckOutputs asserts what every handler output must satisfy: it is a
// valid CloudEvent that can be published, and it carries the tenant.
func CheckOutputs(t *testing.T, outs []event.Event) {
	t.Helper()
	CheckOutputsOf(t, outs, Tenant)
}

// CheckOutputsOf is CheckOutputs for a run of tenant.
func CheckOutputsOf(t *testing.T, outs []event.Event, tenant string) {
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

// NopLog is the logger the roles get in tests: it writes nothing.
var NopLog = zerolog.Nop()

// Embedder is the offline embedder at the dimension the services use.
var Embedder = store.NewHashEmbedder(1536)

// StepIndexes returns the indexes of steps, in order.
func StepIndexes(steps []orch.Step) []int {
	idx := make([]int, len(steps))
	for i, s := range steps {
		idx[i] = s.Index
	}
	return idx
}
