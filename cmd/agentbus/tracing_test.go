package main

import (
	"compress/gzip"
	"encoding/hex"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	collector "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	common "go.opentelemetry.io/proto/otlp/common/v1"
	"google.golang.org/protobuf/proto"

	"github.com/agentbus/agentbus/orch"
	"github.com/agentbus/agentbus/skills/demo"
)

// span is one exported span, flattened.
type span struct {
	service, name, traceID string
	attrs                  map[string]any
}

// otlpSink is an in-memory OTLP/HTTP trace receiver.
type otlpSink struct {
	mu    sync.Mutex
	spans []span
}

func (s *otlpSink) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var body io.Reader = r.Body
	if r.Header.Get("Content-Encoding") == "gzip" {
		zr, err := gzip.NewReader(r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		body = zr
	}
	b, err := io.ReadAll(body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	var req collector.ExportTraceServiceRequest
	if err := proto.Unmarshal(b, &req); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, rs := range req.GetResourceSpans() {
		service := attrMap(rs.GetResource().GetAttributes())["service.name"]
		for _, ss := range rs.GetScopeSpans() {
			for _, sp := range ss.GetSpans() {
				s.spans = append(s.spans, span{service: service.(string), name: sp.GetName(),
					traceID: hex.EncodeToString(sp.GetTraceId()), attrs: attrMap(sp.GetAttributes())})
			}
		}
	}
	w.Header().Set("Content-Type", "application/x-protobuf")
	out, _ := proto.Marshal(&collector.ExportTraceServiceResponse{})
	_, _ = w.Write(out)
}

func (s *otlpSink) all() []span {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.spans)
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

func attrMap(kvs []*common.KeyValue) map[string]any {
	m := map[string]any{}
	for _, kv := range kvs {
		v := kv.GetValue()
		switch v.Value.(type) {
		case *common.AnyValue_StringValue:
			m[kv.GetKey()] = v.GetStringValue()
		case *common.AnyValue_IntValue:
			m[kv.GetKey()] = v.GetIntValue()
		case *common.AnyValue_DoubleValue:
			m[kv.GetKey()] = v.GetDoubleValue()
		case *common.AnyValue_BoolValue:
			m[kv.GetKey()] = v.GetBoolValue()
		}
	}
	return m
}

// TestTracing_OneRunIsOneTraceAcrossFiveProcesses runs the five binaries
// exporting to an in-memory OTLP receiver: the run's ingress request, each
// role's hops (router, planner, executor, projector in the aggregator) and
// its model and tool calls are spans of one trace; model spans carry the
// GenAI usage attributes, tool spans the tool's name, one per skill call
// the Skill Service executed.
func TestTracing_OneRunIsOneTraceAcrossFiveProcesses(t *testing.T) {
	sink := &otlpSink{}
	srv := httptest.NewServer(sink)
	t.Cleanup(srv.Close)
	c := newCluster(t, demo.Config{}, "OTEL_EXPORTER_OTLP_ENDPOINT="+srv.URL, "OTEL_BSP_SCHEDULE_DELAY=100")
	c.startAll(1)
	res := postRun(t, c.ingURL, orch.RunRequest{TenantID: "demo", UserID: "u", SessionID: "s-trace", Message: demoTask})
	if res.TerminalCode != orch.CodeSuccess {
		t.Fatalf("run ended %s: %s", res.TerminalCode, res.Response)
	}

	var root string
	services := map[string]bool{}
	var trace []span
	eventually(t, 20*time.Second, "the spans of every process", func() bool {
		root, trace, services = "", nil, map[string]bool{}
		for _, sp := range sink.all() {
			if sp.service == "ingress" && sp.name == "POST /agent/run" {
				root = sp.traceID
			}
		}
		for _, sp := range sink.all() {
			if sp.traceID == root {
				trace = append(trace, sp)
				services[sp.service] = true
			}
		}
		// Every process exports in its own batches: wait for all of them.
		models, tools := 0, 0
		for _, sp := range trace {
			models += boolInt(strings.HasPrefix(sp.name, "chat"))
			tools += boolInt(strings.HasPrefix(sp.name, "execute_tool "))
		}
		return root != "" && len(services) == 5 && models == res.Usage.Calls && tools >= 2
	})
	for _, want := range []string{"ingress", "router", "planner", "executor", "aggregator"} {
		if !services[want] {
			t.Errorf("no span of %s in the run's trace (services %v)", want, services)
		}
	}
	// Every hop of the run is in that one trace.
	for _, sp := range sink.all() {
		if sp.attrs["agentbus.run_id"] == res.RunID && sp.traceID != root {
			t.Errorf("%s %s is in trace %s, not the run's %s", sp.service, sp.name, sp.traceID, root)
		}
	}
	var models, tools int
	for _, sp := range trace {
		switch {
		case strings.HasPrefix(sp.name, "chat"):
			models++
			if sp.attrs["gen_ai.operation.name"] != "chat" || sp.attrs["gen_ai.provider.name"] != "offline" ||
				sp.attrs["gen_ai.usage.input_tokens"] == nil || sp.attrs["gen_ai.usage.output_tokens"] == nil || sp.attrs["gen_ai.request.model"] == "" {
				t.Errorf("model span %s: %v", sp.name, sp.attrs)
			}
		case strings.HasPrefix(sp.name, "execute_tool "):
			tools++
			if sp.attrs["gen_ai.operation.name"] != "execute_tool" || sp.name != "execute_tool "+sp.attrs["gen_ai.tool.name"].(string) {
				t.Errorf("tool span %s: %v", sp.name, sp.attrs)
			}
		case strings.HasPrefix(sp.name, "invoke_agent "):
			if sp.attrs["gen_ai.operation.name"] != "invoke_agent" || sp.attrs["gen_ai.agent.name"] == "" {
				t.Errorf("agent span %s: %v", sp.name, sp.attrs)
			}
		}
	}
	if models != res.Usage.Calls || models == 0 {
		t.Errorf("%d model spans, the run made %d model calls", models, res.Usage.Calls)
	}
	if want := c.skills.Calls(demo.SkillOutletList) + c.skills.Calls(demo.SkillEngagementAnalytics); tools != want {
		t.Errorf("%d tool spans, the Skill Service executed %d calls", tools, want)
	}
}
