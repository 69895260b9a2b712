package api_test

import (
	"bytes"
	"flag"
	"os"
	"reflect"
	"testing"

	"github.com/agentbus/agentbus/agents"
	"github.com/agentbus/agentbus/handlers/a2a"
	"github.com/agentbus/agentbus/handlers/chat"
	"github.com/agentbus/agentbus/handlers/defs"
	"github.com/agentbus/agentbus/handlers/health"
	"github.com/agentbus/agentbus/handlers/ingress"
	"github.com/agentbus/agentbus/handlers/runctl"
	"github.com/agentbus/agentbus/handlers/tracedag"
	"github.com/agentbus/agentbus/runclient"
	"github.com/agentbus/agentbus/store"
)

var update = flag.Bool("update", false, "rewrite the generated component schemas of api/openapi.yaml")

// wireRoots are the Go types the HTTP API reads and writes, by the
// component name the document gives them. Every type they reach gets a
// component too (named after its package and type), so the document's
// wire types come from the Go types in one direction.
var wireRoots = []wireRoot{
	// Requests the native API decodes strictly: an unknown field is refused
	// (400 unknown_field), so their schemas admit no other property.
	{"RunRequest", reflect.TypeFor[runclient.Request](), strictInput},
	{"ApprovalRequest", reflect.TypeFor[runclient.ApprovalRequest](), strictInput},
	{"SteerRequest", reflect.TypeFor[runclient.SteerRequest](), strictInput},
	{"MemoryFact", reflect.TypeFor[runclient.MemoryFact](), strictInput},
	{"MemoryQueryBody", reflect.TypeFor[ingress.MemoryQueryBody](), strictInput},
	{"SoulBody", reflect.TypeFor[ingress.SoulBody](), strictInput},
	{"AgentBody", reflect.TypeFor[defs.AgentBody](), strictInput},
	{"TriggerBody", reflect.TypeFor[defs.TriggerBody](), strictInput},
	{"ToolBody", reflect.TypeFor[defs.ToolBody](), strictInput},
	{"SkillBody", reflect.TypeFor[defs.SkillBody](), strictInput},
	{"InboundEvent", reflect.TypeFor[ingress.InboundEvent](), strictInput},
	{"SessionHandoffRequest", reflect.TypeFor[ingress.SessionHandoffRequest](), strictInput},
	{"SessionReply", reflect.TypeFor[ingress.SessionReply](), strictInput},
	// OpenAI's chat request, decoded leniently: other fields are ignored.
	{"ChatRequest", reflect.TypeFor[chat.ChatRequest](), input},
	// A2A's JSON-RPC call, decoded leniently as well.
	{"A2ARequest", reflect.TypeFor[a2a.Request](), input},
	// Answers.
	{"RunResponse", reflect.TypeFor[runclient.Response](), output},
	{"CancelResponse", reflect.TypeFor[runclient.CancelResponse](), output},
	{"ControlResponse", reflect.TypeFor[runclient.ControlResponse](), output},
	{"Chunk", reflect.TypeFor[runclient.Chunk](), output},
	{"SessionProgress", reflect.TypeFor[runclient.SessionProgress](), output},
	{"ToolProgress", reflect.TypeFor[runclient.ToolProgress](), output},
	{"Observation", reflect.TypeFor[runclient.Observation](), output},
	{"APIError", reflect.TypeFor[runclient.APIError](), output},
	{"DefinitionError", reflect.TypeFor[defs.DefinitionError](), output},
	{"Remembered", reflect.TypeFor[runclient.Remembered](), output},
	{"MemoryHit", reflect.TypeFor[runclient.MemoryHit](), output},
	{"Agent", reflect.TypeFor[agents.Agent](), output},
	{"Trigger", reflect.TypeFor[agents.Trigger](), output},
	{"Tool", reflect.TypeFor[agents.Tool](), output},
	{"Skill", reflect.TypeFor[agents.Skill](), output},
	{"InboundResult", reflect.TypeFor[ingress.InboundResult](), output},
	{"EventEvaluations", reflect.TypeFor[ingress.EventEvaluations](), output},
	{"ExecutionList", reflect.TypeFor[ingress.ExecutionList](), output},
	{"SessionList", reflect.TypeFor[ingress.SessionList](), output},
	{"SessionHandoffResult", reflect.TypeFor[ingress.SessionHandoffResult](), output},
	{"SessionReplied", reflect.TypeFor[ingress.SessionReplied](), output},
	{"RunSummary", reflect.TypeFor[ingress.RunSummary](), output},
	{"Health", reflect.TypeFor[health.Health](), output},
	{"TraceDAG", reflect.TypeFor[tracedag.TraceDAG](), output},
	{"ChatCompletion", reflect.TypeFor[chat.ChatCompletion](), output},
	{"ChatChunk", reflect.TypeFor[chat.ChatChunk](), output},
	{"ChatModelList", reflect.TypeFor[chat.ChatModelList](), output},
	{"A2AResponse", reflect.TypeFor[a2a.Response](), output},
	{"A2AAgentCard", reflect.TypeFor[a2a.AgentCard](), output},
	{"GateView", reflect.TypeFor[runctl.GateView](), output},
	{"StorePlan", reflect.TypeFor[store.Plan](), output},
	{"StoreEvent", reflect.TypeFor[store.Event](), output},
	{"StoreSoul", reflect.TypeFor[store.Soul](), output},
	{"StoreSession", reflect.TypeFor[store.Session](), output},
	{"StoreExecution", reflect.TypeFor[store.Execution](), output},
}

// storeDocs are the store's documents the API answers with: their
// components are the store's own JSON Schemas (store.SchemaJSON), the
// ones every write is checked against, not a reflection of the Go type.
var storeDocs = map[reflect.Type]string{
	reflect.TypeFor[store.Plan]():      store.IndexPlans,
	reflect.TypeFor[store.Event]():     store.IndexEvents,
	reflect.TypeFor[store.Soul]():      store.IndexSouls,
	reflect.TypeFor[store.Session]():   store.IndexSessions,
	reflect.TypeFor[store.Execution](): store.IndexExecutions,
}

// TestWireSchemas fails when the component schemas generated from the Go
// wire types differ from those in api/openapi.yaml; -update rewrites them.
func TestWireSchemas(t *testing.T) {
	const path = "openapi.yaml"
	doc, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	gen, err := generateSchemas(wireRoots, storeDocs)
	if err != nil {
		t.Fatal(err)
	}
	want, err := spliceGenerated(doc, gen)
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Equal(doc, want) {
		return
	}
	if *update {
		if err := os.WriteFile(path, want, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	t.Fatalf("api/openapi.yaml's generated schemas are stale: run go test ./api -run TestWireSchemas -update")
}
