package tools_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	json "github.com/go-json-experiment/json/v1"
	"github.com/rs/zerolog"

	"github.com/agentbus/agentbus/agents"
	"github.com/agentbus/agentbus/egress"
	"github.com/agentbus/agentbus/egress/egresstest"
	"github.com/agentbus/agentbus/skills"
	"github.com/agentbus/agentbus/tools"
)

const hookSecret = "whsec-test-0123456789abcdef"

// receiver is a tenant's HTTPS endpoint: it verifies every request with
// agents.VerifyWebhook (default window, a replay guard) and records what
// it accepted and refused.
type receiver struct {
	srv *egresstest.Server

	mu       sync.Mutex
	guard    agents.ReplayGuard
	accepted []*http.Request
	bodies   [][]byte
	refused  []error
	flaky    int // 503 answers still to give on /flaky
}

func newReceiver(t *testing.T) *receiver {
	rc := &receiver{flaky: 2}
	rc.srv = egresstest.NewTLSServer(t, http.HandlerFunc(rc.serve))
	return rc
}

func (rc *receiver) serve(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	err := agents.VerifyWebhook([]byte(hookSecret), r.Header.Get(agents.HeaderWebhookTimestamp),
		r.Header.Get(agents.HeaderWebhookSignature), body, time.Now(), 0, &rc.guard)
	rc.mu.Lock()
	if err != nil {
		rc.refused = append(rc.refused, err)
		rc.mu.Unlock()
		http.Error(w, err.Error(), http.StatusUnauthorized)
		return
	}
	rc.accepted = append(rc.accepted, r)
	rc.bodies = append(rc.bodies, body)
	flaky := r.URL.Path == "/flaky" && rc.flaky > 0
	if flaky {
		rc.flaky--
	}
	rc.mu.Unlock()
	switch r.URL.Path {
	case "/big":
		_, _ = w.Write(bytes.Repeat([]byte("x"), tools.MaxResponseBytes+1))
	case "/slow":
		// Never answers in time: once the caller hangs up, the exchange
		// is aborted rather than answered (an answer written as the
		// caller closes can reach it).
		select {
		case <-r.Context().Done():
			panic(http.ErrAbortHandler)
		case <-time.After(3 * time.Second):
		}
	case "/flaky":
		if flaky {
			http.Error(w, "busy", http.StatusServiceUnavailable)
			return
		}
		_, _ = w.Write([]byte(`{"ok":true}`))
	case "/text":
		_, _ = w.Write([]byte("shipped"))
	case "/reject":
		http.Error(w, "order 42 is unknown", http.StatusNotFound)
	default:
		var req tools.WebhookRequest
		_ = json.Unmarshal(body, &req)
		out, _ := json.Marshal(map[string]any{"status": "shipped", "echo": req.Arguments})
		_, _ = w.Write(out)
	}
}

// local is the allow-list of the receivers, on loopback.
var local = egress.MustNew("127.0.0.1")

func (rc *receiver) counts() (accepted, refused int) {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return len(rc.accepted), len(rc.refused)
}

// hookTool is a webhook tool of tenant acme on path of rc, its secret
// stored.
func hookTool(t *testing.T, e *env, rc *receiver, id, path string, h agents.ToolHandler) agents.Tool {
	t.Helper()
	h.URL = rc.srv.URL + path
	tool := agents.Tool{ToolID: id, TenantID: "acme", Type: agents.ToolTypeCustom, ToolSpec: agents.ToolSpec{Name: "lookup_order",
		Description: "Look up an order.", Parameters: json.RawMessage(`{"type":"object"}`), Handler: h}}
	tool.Normalize()
	if err := tool.Validate(); err != nil {
		t.Fatal(err)
	}
	if err := e.secrets.Put(testCtx(t), "acme", id, hookSecret); err != nil {
		t.Fatal(err)
	}
	return tool
}

// TestWebhookSignedAndReplayRefused: the call reaches a local HTTPS
// receiver that verifies its signature; the same request sent again is
// refused as a replay, a tampered body as a bad signature, and a call
// whose timestamp is outside the window as stale.
func TestWebhookSignedAndReplayRefused(t *testing.T) {
	e, rc := newEnv(t), newReceiver(t)
	var logs bytes.Buffer
	hooks := &tools.Webhooks{Secrets: e.secrets, Egress: local, RootCAs: rc.srv.Roots(), Log: zerolog.New(&logs).Level(zerolog.DebugLevel)}
	tool := hookTool(t, e, rc, "tool-1", "/orders", agents.ToolHandler{})
	ctx := skills.WithCallInfo(testCtx(t), skills.CallInfo{RunID: "run-1", SessionID: "sess-1"})
	out, err := hooks.Call(ctx, "acme", tool, json.RawMessage(`{"order_id":"42","email":"jane.doe@example.com"}`), "run-1/1/t1/0")
	if err != nil {
		t.Fatalf("call: %v", err)
	}
	var res struct {
		Status string         `json:"status"`
		Echo   map[string]any `json:"echo"`
	}
	if err := json.Unmarshal(out, &res); err != nil || res.Status != "shipped" || res.Echo["order_id"] != "42" {
		t.Fatalf("result %s (%v)", out, err)
	}
	rc.mu.Lock()
	first, body := rc.accepted[0], rc.bodies[0]
	rc.mu.Unlock()
	var sent tools.WebhookRequest
	if err := json.Unmarshal(body, &sent); err != nil || sent.Tool != "lookup_order" || sent.TenantID != "acme" ||
		sent.RunID != "run-1" || sent.SessionID != "sess-1" || sent.CallID != "run-1/1/t1/0" ||
		first.Header.Get(agents.HeaderIdempotencyKey) != "run-1/1/t1/0" ||
		!strings.HasPrefix(first.Header.Get(agents.HeaderWebhookSignature), "v1=") {
		t.Fatalf("sent %s with headers %v (%v)", body, first.Header, err)
	}

	resend := func(b []byte) int {
		req, _ := http.NewRequestWithContext(testCtx(t), http.MethodPost, rc.srv.URL+"/orders", bytes.NewReader(b))
		for _, h := range []string{agents.HeaderWebhookTimestamp, agents.HeaderWebhookSignature, agents.HeaderIdempotencyKey} {
			req.Header.Set(h, first.Header.Get(h))
		}
		resp, err := rc.srv.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if st := resend(body); st != http.StatusUnauthorized {
		t.Fatalf("replayed request answered %d", st)
	}
	if st := resend(bytes.Replace(body, []byte(`"42"`), []byte(`"43"`), 1)); st != http.StatusUnauthorized {
		t.Fatalf("tampered request answered %d", st)
	}
	rc.mu.Lock()
	refused := append([]error(nil), rc.refused...)
	rc.mu.Unlock()
	if len(refused) != 2 || !errors.Is(refused[0], agents.ErrWebhookReplay) || !errors.Is(refused[1], agents.ErrWebhookSignature) {
		t.Fatalf("refusals %v", refused)
	}

	// A sender whose clock is 10 minutes behind: outside the window.
	stale := &tools.Webhooks{Secrets: e.secrets, Egress: local, RootCAs: rc.srv.Roots(), Now: func() time.Time { return time.Now().Add(-10 * time.Minute) }}
	_, err = stale.Call(ctx, "acme", tool, json.RawMessage(`{"order_id":"42"}`), "run-1/1/t1/1")
	if !errors.Is(err, skills.ErrSkillFailed) || !strings.Contains(err.Error(), "401") {
		t.Fatalf("stale call: %v", err)
	}
	rc.mu.Lock()
	last := rc.refused[len(rc.refused)-1]
	rc.mu.Unlock()
	if !errors.Is(last, agents.ErrWebhookTimestamp) {
		t.Fatalf("stale refusal %v", last)
	}

	// What was logged about the call is redacted and carries no secret.
	if l := logs.String(); !strings.Contains(l, "webhook tool call") || strings.Contains(l, "jane.doe@example.com") ||
		strings.Contains(l, hookSecret) || !strings.Contains(l, "[EMAIL]") {
		t.Fatalf("logs: %s", l)
	}
}

// TestWebhookResponseOverCap: an answer over 1 MB is refused with a tool
// error the model sees (a skill failure, not a step failure).
func TestWebhookResponseOverCap(t *testing.T) {
	e, rc := newEnv(t), newReceiver(t)
	hooks := &tools.Webhooks{Secrets: e.secrets, Egress: local, RootCAs: rc.srv.Roots()}
	tool := hookTool(t, e, rc, "tool-big", "/big", agents.ToolHandler{Idempotent: true})
	out, err := hooks.Call(testCtx(t), "acme", tool, json.RawMessage(`{}`), "k-big")
	if out != nil || !errors.Is(err, skills.ErrResultTooLarge) || !errors.Is(err, skills.ErrSkillFailed) ||
		!strings.Contains(err.Error(), "tool_response_too_large") || !strings.Contains(err.Error(), "1048576 bytes") {
		t.Fatalf("big answer: %s, %v", out, err)
	}
	if n, _ := rc.counts(); n != 1 {
		t.Fatalf("a refused answer was retried: %d calls", n)
	}
	// Non-object and error answers.
	text := hookTool(t, e, rc, "tool-text", "/text", agents.ToolHandler{})
	if out, err := hooks.Call(testCtx(t), "acme", text, json.RawMessage(`{}`), "k-text"); err != nil || string(out) != `{"text":"shipped"}` {
		t.Fatalf("text answer: %s, %v", out, err)
	}
	rej := hookTool(t, e, rc, "tool-rej", "/reject", agents.ToolHandler{Idempotent: true})
	_, err = hooks.Call(testCtx(t), "acme", rej, json.RawMessage(`{}`), "k-rej")
	if !errors.Is(err, skills.ErrSkillFailed) || !strings.Contains(err.Error(), "HTTP 404") || !strings.Contains(err.Error(), "order 42 is unknown") {
		t.Fatalf("404 answer: %v", err)
	}
}

// TestWebhookTimeoutAndRetries: a call past its timeout is
// skills.ErrTimeout (every attempt); an idempotent tool is retried on
// 503 with the same Idempotency-Key, one that is not is called once.
func TestWebhookTimeoutAndRetries(t *testing.T) {
	e, rc := newEnv(t), newReceiver(t)
	hooks := &tools.Webhooks{Secrets: e.secrets, Egress: local, RootCAs: rc.srv.Roots()}
	slow := hookTool(t, e, rc, "tool-slow", "/slow", agents.ToolHandler{TimeoutMS: 100})
	start := time.Now()
	_, err := hooks.Call(testCtx(t), "acme", slow, json.RawMessage(`{}`), "k-slow")
	if !errors.Is(err, skills.ErrTimeout) || errors.Is(err, skills.ErrSkillFailed) || time.Since(start) > 2*time.Second {
		t.Fatalf("slow call after %s: %v", time.Since(start), err)
	}

	once := hookTool(t, e, rc, "tool-once", "/flaky", agents.ToolHandler{})
	before, _ := rc.counts()
	if _, err := hooks.Call(testCtx(t), "acme", once, json.RawMessage(`{}`), "k-once"); !errors.Is(err, skills.ErrSkillFailed) ||
		!strings.Contains(err.Error(), "503") {
		t.Fatalf("non-idempotent flaky call: %v", err)
	}
	if n, _ := rc.counts(); n-before != 1 {
		t.Fatalf("a non-idempotent tool was called %d times", n-before)
	}

	retried := hookTool(t, e, rc, "tool-retry", "/flaky", agents.ToolHandler{Idempotent: true, BackoffMS: 10})
	rc.mu.Lock()
	rc.flaky = 2
	rc.mu.Unlock()
	before, _ = rc.counts()
	out, err := hooks.Call(testCtx(t), "acme", retried, json.RawMessage(`{}`), "k-retry")
	if err != nil || string(out) != `{"ok":true}` {
		t.Fatalf("idempotent flaky call: %s, %v", out, err)
	}
	rc.mu.Lock()
	attempts, bodies := rc.accepted[before:], rc.bodies[before:]
	rc.mu.Unlock()
	if len(attempts) != 3 {
		t.Fatalf("%d attempts, want 3", len(attempts))
	}
	for i, a := range attempts {
		var sent tools.WebhookRequest
		_ = json.Unmarshal(bodies[i], &sent)
		// Each attempt is signed anew (the receiver's replay guard lets
		// it through) and carries the same call id to dedupe by.
		if a.Header.Get(agents.HeaderIdempotencyKey) != "k-retry" || sent.CallID != "k-retry" || sent.Attempt != i+1 {
			t.Fatalf("attempt %d: key %q, body %s", i+1, a.Header.Get(agents.HeaderIdempotencyKey), bodies[i])
		}
	}
}

// lateTransport is the webhooks' real transport whose answers are handed
// over only once the attempt's deadline has passed: the transport had
// the answer in hand as the call timed out.
type lateTransport struct{ next http.RoundTripper }

func (l lateTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := l.next.RoundTrip(r.WithContext(context.WithoutCancel(r.Context())))
	<-r.Context().Done()
	return resp, err
}

// TestWebhookAnswerAfterTimeout: an answer read after the tool's timeout
// is a timeout, not a result, however complete it is.
func TestWebhookAnswerAfterTimeout(t *testing.T) {
	e, rc := newEnv(t), newReceiver(t)
	hooks := &tools.Webhooks{Secrets: e.secrets, Egress: local, RootCAs: rc.srv.Roots()}
	tools.WrapTransport(hooks, func(next http.RoundTripper) http.RoundTripper { return lateTransport{next: next} })
	tool := hookTool(t, e, rc, "tool-late", "/text", agents.ToolHandler{TimeoutMS: 100})
	out, err := hooks.Call(testCtx(t), "acme", tool, json.RawMessage(`{}`), "k-late")
	if out != nil || !errors.Is(err, skills.ErrTimeout) {
		t.Fatalf("late answer: %s, %v", out, err)
	}
	if n, _ := rc.counts(); n != 1 {
		t.Fatalf("%d requests sent", n)
	}
}

// TestWebhookNoSecret: a tool whose secret is missing, or a store without
// a key, fails the call without sending it.
func TestWebhookNoSecret(t *testing.T) {
	e, rc := newEnv(t), newReceiver(t)
	tool := hookTool(t, e, rc, "tool-1", "/orders", agents.ToolHandler{})
	tool.ToolID = "tool-without-secret"
	hooks := &tools.Webhooks{Secrets: e.secrets, Egress: local, RootCAs: rc.srv.Roots()}
	if _, err := hooks.Call(testCtx(t), "acme", tool, json.RawMessage(`{}`), "k"); !errors.Is(err, skills.ErrSkillFailed) {
		t.Fatalf("call without a secret: %v", err)
	}
	if n, _ := rc.counts(); n != 0 {
		t.Fatalf("%d requests sent", n)
	}
}

// TestWebhookEgress: under the default policy a webhook tool at a
// loopback address, or at a name that resolves to one, fails with an
// egress_denied tool error, not retried, and the receiver accepts no
// connection; with the address allow-listed the call goes through.
func TestWebhookEgress(t *testing.T) {
	e, rc := newEnv(t), newReceiver(t)
	var logs bytes.Buffer
	hooks := &tools.Webhooks{Secrets: e.secrets, RootCAs: rc.srv.Roots(), Log: zerolog.New(&logs)}
	two := 2
	retried := agents.ToolHandler{Idempotent: true, MaxRetries: &two, BackoffMS: 10}
	for _, url := range []string{rc.srv.URL, "https://localhost:" + rc.srv.Port()} {
		tool := hookTool(t, e, rc, "tool-egress", "/orders", retried)
		tool.Handler.URL = url + "/orders"
		out, err := hooks.Call(testCtx(t), "acme", tool, json.RawMessage(`{}`), "k-egress")
		if out != nil || !errors.Is(err, egress.ErrDenied) || !errors.Is(err, skills.ErrSkillFailed) ||
			!strings.Contains(err.Error(), "egress_denied") {
			t.Fatalf("call to %s: %s, %v", url, out, err)
		}
	}
	if n := strings.Count(logs.String(), "webhook tool call"); n != 2 {
		t.Fatalf("%d attempts for 2 calls: a refusal is retried\n%s", n, logs.String())
	}
	if n := rc.srv.Accepted(); n != 0 {
		t.Fatalf("%d connections reached the refused address", n)
	}
	allowed := &tools.Webhooks{Secrets: e.secrets, Egress: local, RootCAs: rc.srv.Roots()}
	tool := hookTool(t, e, rc, "tool-egress", "/orders", agents.ToolHandler{})
	if _, err := allowed.Call(testCtx(t), "acme", tool, json.RawMessage(`{}`), "k-allowed"); err != nil {
		t.Fatalf("allow-listed call: %v", err)
	}
	if n, _ := rc.counts(); n != 1 || rc.srv.Accepted() != 1 {
		t.Fatalf("%d requests over %d connections", n, rc.srv.Accepted())
	}
}
