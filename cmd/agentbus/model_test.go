package main

import (
	"context"
	"math"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	json "github.com/go-json-experiment/json/v1"

	"github.com/agentbus/agentbus/cmd/internal/procs"
	"github.com/agentbus/agentbus/llm"
	"github.com/agentbus/agentbus/llm/llmtest"
	"github.com/agentbus/agentbus/llm/openai"
	"github.com/agentbus/agentbus/orch"
	"github.com/agentbus/agentbus/runclient"
	"github.com/agentbus/agentbus/store"
)

// modelKey is the provider API key the tests configure; it must reach the
// provider and nothing else.
const modelKey = "sk-provider-test-9c1e44ab70d2"

// testPrices prices test-model, so every call has a cost.
const testPrices = `{"test-model": {"input": 1.5, "cached_input": 0.5, "output": 6}}`

// chatServer starts a scripted OpenAI-compatible server from a fixture.
func chatServer(t *testing.T, fixture string, vars map[string]string) *llmtest.ChatServer {
	t.Helper()
	script, err := llmtest.LoadScript(filepath.Join("testdata", "openai", fixture), vars)
	if err != nil {
		t.Fatal(err)
	}
	s := llmtest.NewChatServer(script)
	t.Cleanup(s.Close)
	return s
}

// startUp runs `agentbus up` as an OS process with env and waits for its
// ingress; it returns the ingress URL and the process output.
func startUp(t *testing.T, env ...string) (string, *procs.Buffer) {
	t.Helper()
	addr := freeAddr(t)
	logs := &procs.Buffer{}
	p, err := procs.Start(procs.Spec{Name: "agentbus up", Path: filepath.Join(binaries(t), "agentbus"),
		Args: []string{"up", "--http", addr, "--nats-port", "-1", "--data", t.TempDir(), "--demo-skills", "127.0.0.1:0"},
		Env:  append([]string{"LOG_LEVEL=debug", "ACK_WAIT=5s"}, env...), Output: logs})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		p.Stop(syscall.SIGTERM, 20*time.Second)
		if t.Failed() {
			t.Logf("--- agentbus up ---\n%s", tail(logs.String(), 6000))
		}
	})
	url := "http://" + addr
	eventually(t, 60*time.Second, "agentbus up to listen", func() bool {
		resp, err := http.Get(url + "/healthz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})
	return url, logs
}

// modelEnv is the environment of a run against the scripted server.
func modelEnv(t *testing.T, chat *llmtest.ChatServer) []string {
	prices := filepath.Join(t.TempDir(), "prices.json")
	if err := os.WriteFile(prices, []byte(testPrices), 0o600); err != nil {
		t.Fatal(err)
	}
	return []string{"MODEL=openai:test-model", "MODEL_BASE_URL=" + chat.URL, "MODEL_API_KEY=" + modelKey,
		"MODEL_PRICES_FILE=" + prices, "MODEL_MAX_RETRIES=1"}
}

// streamRun posts a streamed run with the CLI's client and returns its
// answer chunks and result.
func streamRun(t *testing.T, url string, req orch.RunRequest) ([]runclient.Chunk, orch.RunResult) {
	t.Helper()
	var answer []runclient.Chunk
	res, err := runclient.NewHTTP(url, nil).Stream(context.Background(), req, func(c runclient.Chunk) {
		if c.MessageType == "answer" {
			answer = append(answer, c)
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	return answer, res
}

// getJSON decodes the JSON answer of GET url into v.
// getJSON reads url as tenant (every read is tenant-scoped).
func getJSON(t *testing.T, url, tenant string, v any) {
	t.Helper()
	if !fetchJSON(t, url, tenant, v) {
		t.Fatalf("GET %s: 404 Not Found", url)
	}
}

// fetchJSON is getJSON that reports a 404 (a projection not written yet:
// it trails the run by the projector's lag) instead of failing.
func fetchJSON(t *testing.T, url, tenant string, v any) bool {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("X-Tenant-Id", tenant)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode == http.StatusNotFound {
		return false
	}
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %s", url, resp.Status)
	}
	if err := json.NewDecoder(resp.Body).Decode(v); err != nil {
		t.Fatal(err)
	}
	return true
}

// modelCalls reads the model.called events of a plan's trace once the run
// has been indexed.
func modelCalls(t *testing.T, url string, res orch.RunResult) []llm.Call {
	t.Helper()
	var trace struct {
		Events []store.Event `json:"events"`
	}
	eventually(t, 15*time.Second, "the trace to hold run.finished", func() bool {
		trace.Events = nil
		if !fetchJSON(t, url+"/agent/plans/"+res.PlanID+"/trace", res.TenantID, &trace) {
			return false
		}
		n := len(trace.Events)
		return n > 0 && trace.Events[n-1].EventType == "run.finished"
	})
	var calls []llm.Call
	for _, e := range trace.Events {
		if e.EventType != "model.called" {
			continue
		}
		var c llm.Call
		if err := json.Unmarshal(e.Payload, &c); err != nil {
			t.Fatalf("model.called payload %s: %v", e.Payload, err)
		}
		calls = append(calls, c)
	}
	return calls
}

// TestRealModel_OpenAICompatibleDemoRunEndToEnd: `agentbus up` with
// MODEL=openai:test-model against a local server that speaks the chat
// completions wire format and replays a recorded conversation runs the
// demo task to SUCCESS, streams the answer over SSE as it is written,
// and traces every model call with its tokens and cost; the run's totals
// are their sum. The provider key reaches the provider and no log line.
func TestRealModel_OpenAICompatibleDemoRunEndToEnd(t *testing.T) {
	chat := chatServer(t, "demo_conversation.json", nil)
	url, logs := startUp(t, modelEnv(t, chat)...)
	answer, res := streamRun(t, url, orch.RunRequest{TenantID: "demo", UserID: "u", SessionID: "s-openai", Message: demoTask})
	if res.TerminalCode != orch.CodeSuccess {
		t.Fatalf("run ended %s: %s (unmatched model requests: %v)", res.TerminalCode, res.Response, chat.Unmatched())
	}
	if n := chat.Remaining(); n != 0 {
		t.Errorf("%d scripted exchanges were never asked for", n)
	}

	// The answer streamed in several chunks of one message, adding up to
	// the scripted synthesis, which is the run's response.
	var text strings.Builder
	for _, c := range answer {
		text.WriteString(c.Content)
	}
	if len(answer) < 3 || text.String() != res.Response || !strings.HasPrefix(res.Response, "Outlets ranked by engagement:\n1. Central Station") {
		t.Fatalf("%d answer chunks %q; response %q", len(answer), text.String(), res.Response)
	}

	// What the provider was sent: the key, the model, structured output
	// for routing, tools for the executor, streaming for the answer.
	got := map[llm.Task]int{}
	for _, r := range chat.Received() {
		got[r.Task]++
		if r.Authorization != "Bearer "+modelKey || r.Body["model"] != "test-model" {
			t.Errorf("%s request: authorization %q, model %v", r.Task, r.Authorization, r.Body["model"])
		}
		switch r.Task {
		case llm.TaskRoute, llm.TaskPlan:
			if rf, _ := r.Body["response_format"].(map[string]any); rf["type"] != "json_schema" {
				t.Errorf("%s request asked no json_schema response format: %v", r.Task, r.Body["response_format"])
			}
		case llm.TaskAct:
			if tools, _ := r.Body["tools"].([]any); len(tools) != 1 {
				t.Errorf("act request offered %d tools, want the step's one allowed skill", len(tools))
			}
		case llm.TaskSynthesize:
			if r.Body["stream"] != true {
				t.Errorf("the synthesis was not streamed")
			}
		}
	}
	if got[llm.TaskRoute] != 1 || got[llm.TaskPlan] != 1 || got[llm.TaskAct] != 4 || got[llm.TaskSynthesize] != 1 {
		t.Errorf("provider requests by task = %v", got)
	}

	// The trace lists every call with tokens and cost; the totals add up.
	calls := modelCalls(t, url, res)
	var sum llm.Usage
	for _, c := range calls {
		if c.Provider != "openai" || c.Model != "test-model" || c.InputTokens == 0 || c.CostUSD <= 0 || c.PromptVersion == "" {
			t.Errorf("model.called %+v lacks provider, model, tokens, cost or prompt version", c)
		}
		sum = sum.Add(c.Usage())
	}
	// The fixture's route call: 412 input tokens, 31 output, none cached.
	if want := (412*1.5 + 31*6.0) / 1e6; math.Abs(calls[0].CostUSD-want) > 1e-12 || calls[0].InputTokens != 412 {
		t.Errorf("first call %+v, want the route call's 412 tokens costing %v", calls[0], want)
	}
	if len(calls) != 7 || res.Usage.Calls != 7 || res.Usage.InputTokens != sum.InputTokens ||
		res.Usage.OutputTokens != sum.OutputTokens || res.Usage.CachedInputTokens != sum.CachedInputTokens ||
		math.Abs(res.Usage.CostUSD-sum.CostUSD) > 1e-12 {
		t.Fatalf("run totals %+v, want the sum of its %d model.called events %+v", res.Usage, len(calls), sum)
	}
	var plan struct {
		Plan store.Plan `json:"plan"`
	}
	eventually(t, 10*time.Second, "the final plan projection", func() bool {
		if !fetchJSON(t, url+"/agent/plans/"+res.PlanID, res.TenantID, &plan) {
			return false
		}
		return plan.Plan.Status == store.PlanStatusComplete || plan.Plan.Status == store.PlanStatusFailed
	})
	if plan.Plan.Usage != res.Usage {
		t.Errorf("GET /agent/plans usage %+v, want %+v", plan.Plan.Usage, res.Usage)
	}
	if strings.Contains(logs.String(), modelKey) || !strings.Contains(logs.String(), "run requested") {
		t.Fatalf("the logs hold the provider key, or logging was not captured")
	}
}

// TestRealModel_PlainMCPFilesystemOverStdio: the scripted model drives a
// run in plain-MCP mode against @modelcontextprotocol/server-filesystem
// over stdio. Its list_directory call, with the path argument the server
// requires, reaches the server, whose real listing comes back to the
// model, and the run ends SUCCESS.
func TestRealModel_PlainMCPFilesystemOverStdio(t *testing.T) {
	server, err := filepath.Abs("../../.cache/mcp/node_modules/@modelcontextprotocol/server-filesystem/dist/index.js")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(server); err != nil {
		t.Fatalf("server-filesystem is not installed (run deploy/mcp/setup.sh): %v", err)
	}
	dir := t.TempDir()
	for _, f := range []string{"notes.txt", "report.csv"} {
		if err := os.WriteFile(filepath.Join(dir, f), []byte("agentbus\n"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	chat := chatServer(t, "filesystem_conversation.json", map[string]string{"DIR": dir})
	command, _ := json.Marshal([]string{"node", server, dir})
	url, _ := startUp(t, append(modelEnv(t, chat), "SKILL_TRANSPORT=stdio", "SKILL_MODE=plain", "SKILL_COMMAND="+string(command))...)
	res := postRun(t, url, orch.RunRequest{TenantID: "demo", UserID: "u", SessionID: "s-fs", Message: "List the files in " + dir})
	if res.TerminalCode != orch.CodeSuccess || res.Response != "The directory holds two files: notes.txt and report.csv." {
		t.Fatalf("run ended %s: %s (unmatched model requests: %v)", res.TerminalCode, res.Response, chat.Unmatched())
	}
	// The second executor turn carried the server's real answer to the
	// list_directory call made with the directory's path.
	var sawCall, sawResult bool
	for _, r := range chat.Received() {
		if r.Task != llm.TaskAct {
			continue
		}
		body := string(r.Raw)
		sawCall = sawCall || strings.Contains(body, `list_directory`) && strings.Contains(body, `\"path\":\"`+dir)
		sawResult = sawResult || strings.Contains(body, "[FILE] notes.txt") && strings.Contains(body, "[FILE] report.csv")
	}
	if !sawCall || !sawResult {
		t.Fatalf("list_directory call seen %v, its listing returned %v", sawCall, sawResult)
	}
}

// TestRealModel_ProviderErrors: a 429 with Retry-After is retried after
// it; a provider answering 500 in every structured mode until the retries
// are spent ends the run UNAVAILABLE_DEP; with MODEL_FALLBACK=offline the same run succeeds.
func TestRealModel_ProviderErrors(t *testing.T) {
	demo, err := llmtest.LoadScript(filepath.Join("testdata", "openai", "demo_conversation.json"), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Run("429 then success", func(t *testing.T) {
		chat := llmtest.NewChatServer(append([]llmtest.Exchange{{Task: llm.TaskRoute, Status: 429, RetryAfter: "1"}}, demo...))
		defer chat.Close()
		url, _ := startUp(t, modelEnv(t, chat)...)
		res := postRun(t, url, orch.RunRequest{TenantID: "demo", UserID: "u", SessionID: "s-429", Message: demoTask})
		if res.TerminalCode != orch.CodeSuccess {
			t.Fatalf("run ended %s: %s", res.TerminalCode, res.Response)
		}
		got := chat.Received()
		if gap := got[1].At.Sub(got[0].At); got[0].Task != llm.TaskRoute || got[1].Task != llm.TaskRoute || gap < 900*time.Millisecond {
			t.Fatalf("the retry came %v after the 429, want about Retry-After: 1s", gap)
		}
	})
	down := []llmtest.Exchange{{Task: llm.TaskRoute, Status: 500, Times: -1}}
	t.Run("500 until the retries are spent", func(t *testing.T) {
		chat := llmtest.NewChatServer(down)
		defer chat.Close()
		url, _ := startUp(t, modelEnv(t, chat)...)
		res := postRun(t, url, orch.RunRequest{TenantID: "demo", UserID: "u", SessionID: "s-500", Message: demoTask})
		if res.TerminalCode != orch.CodeUnavailableDep {
			t.Fatalf("run ended %s: %s", res.TerminalCode, res.Response)
		}
		// The route asks for a schema: a 500 may be the server refusing
		// the mode, so each mode is tried once, then the first again with
		// its retry (MODEL_MAX_RETRIES=1).
		if n, want := len(chat.Received()), len(openai.Ladder)+2; n != want {
			t.Errorf("the provider got %d requests, want %d", n, want)
		}
		if strings.Contains(res.Response, modelKey) {
			t.Errorf("the response holds the provider key")
		}
	})
	t.Run("500 with the offline fallback", func(t *testing.T) {
		chat := llmtest.NewChatServer([]llmtest.Exchange{{Task: llm.TaskRoute, Status: 500, Times: -1},
			{Task: llm.TaskPlan, Status: 500, Times: -1}, {Task: llm.TaskAct, Status: 500, Times: -1}, {Task: llm.TaskSynthesize, Status: 500, Times: -1}})
		defer chat.Close()
		url, _ := startUp(t, append(modelEnv(t, chat), "MODEL_FALLBACK=offline")...)
		res := postRun(t, url, orch.RunRequest{TenantID: "demo", UserID: "u", SessionID: "s-fallback", Message: demoTask})
		if res.TerminalCode != orch.CodeSuccess || !strings.Contains(res.Response, "Central Station") {
			t.Fatalf("run ended %s: %s", res.TerminalCode, res.Response)
		}
		fell := 0
		for _, c := range modelCalls(t, url, res) {
			if c.FallbackReason != "" && c.Provider == "offline" {
				fell++
			}
		}
		if fell != 7 {
			t.Errorf("%d model calls fell back to offline, want all 7", fell)
		}
	})
}
