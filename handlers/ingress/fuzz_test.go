package ingress_test

import (
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	json "github.com/go-json-experiment/json/v1"

	"github.com/agentbus/agentbus/handlers/chat"
	"github.com/agentbus/agentbus/handlers/ingress"
	"github.com/agentbus/agentbus/handlers/internal/handlerstest"
)

// fuzzRoutes are the routes that read a JSON body, with ids in their paths.
var fuzzRoutes = []string{
	"POST /agent/run",
	"PUT /agent/souls/" + handlerstest.Tenant,
	"POST /agent/sessions/sess-f/reply",
	"POST /agent/sessions/sess-f/handoff",
	"POST /agent/memory",
	"POST /agent/runs/run-f/cancel",
	"POST /agent/runs/run-f/approvals/gate-f",
	"POST /agent/runs/run-f/interrupt",
	"POST /agent/runs/run-f/resume",
	"POST /agent/runs/run-f/steer",
	"POST /agent/agents",
	"PUT /agent/agents/agent-f",
	"POST /agent/triggers",
	"PUT /agent/triggers/trig-f",
	"POST /agent/events",
	"POST /agent/tools",
	"PUT /agent/tools/tool-f",
	"POST /v1/chat/completions",
}

// FuzzBodies sends fuzzed bodies to every route that reads one, on a real
// ingress over a real nats-server and store. Whatever the body, the answer
// is JSON; a refusal is a 4xx (or a 503 for what this ingress does not
// serve) with a stable error code; nothing is another 5xx (a panic or an
// error the ingress did not classify) but the 504 run_timeout of a valid
// run, which no role here picks up.
func FuzzBodies(f *testing.F) {
	env := handlerstest.NewEnv(f)
	srv := handlerstest.NewIngressServer(f, env, ingress.IngressConfig{MaxBodyBytes: 64 << 10, RunTimeout: 200 * time.Millisecond,
		Adapters: []ingress.Adapter{chat.Adapter{}}})
	for i := range fuzzRoutes {
		for _, body := range []string{
			`{}`, `[]`, `null`, `{"task":"List the active outlets","session_id":"s1"}`,
			`{"tenant_id":"` + handlerstest.Tenant + `","persona":"p","policies":{}}`,
			`{"decision":"approve","content":{"a":1}}`, `{"reason":"stop"}`, `{"message":"go on"}`,
			`{"name":"a","type":"router","model":"offline","instructions":"x"}`,
			`{"name":"t","event_type":"message.created","conditions":{"all":[{"field":"a","operator":"eq","value":1}]}}`,
			`{"name":"w","kind":"webhook","url":"https://example.com/hook","input_schema":{"type":"object"}}`,
			`{"type":"message.created","data":{"text":"hi"}}`, `{"content":"a fact","scope":"user"}`,
			`{"task":` + strings.Repeat("[", 2000), "\x00", `{"a":1}{"b":2}`,
			`{"model":"agentbus","messages":[{"role":"user","content":[{"type":"text","text":"hi"}]}],"n":2}`,
			`{"model":"agent-f","messages":[{"role":"system","content":"x"},{"role":"user","content":[{"type":"image_url"}]}]}`,
		} {
			f.Add(uint8(i), body)
		}
	}
	f.Fuzz(func(t *testing.T, route uint8, body string) {
		method, path, _ := strings.Cut(fuzzRoutes[int(route)%len(fuzzRoutes)], " ")
		req, err := http.NewRequestWithContext(t.Context(), method, srv.URL+path, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("X-Tenant-Id", handlerstest.Tenant)
		req.Header.Set("Content-Type", "application/json")
		resp, err := srv.Client().Do(req)
		if err != nil {
			t.Fatalf("%s %s: %v", method, path, err)
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		if err != nil {
			t.Fatal(err)
		}
		timedOut := resp.StatusCode == http.StatusGatewayTimeout && strings.Contains(string(b), `"code":"run_timeout"`)
		if resp.StatusCode >= 500 && resp.StatusCode != http.StatusServiceUnavailable && !timedOut {
			t.Fatalf("%s %s %.200q: %d %s", method, path, body, resp.StatusCode, b)
		}
		if resp.StatusCode == http.StatusNoContent {
			return
		}
		if strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
			return
		}
		var answer struct {
			Error *struct {
				Code string `json:"code"`
			} `json:"error"`
		}
		if err := json.Unmarshal(b, &answer); err != nil {
			t.Fatalf("%s %s %.200q: %d, not JSON: %s", method, path, body, resp.StatusCode, b)
		}
		if resp.StatusCode >= 400 && (answer.Error == nil || answer.Error.Code == "") {
			t.Fatalf("%s %s %.200q: %d without an error code: %s", method, path, body, resp.StatusCode, b)
		}
	})
}
