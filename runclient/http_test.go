package runclient_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/cloudevents/sdk-go/v2/event"
	json "github.com/go-json-experiment/json/v1"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"

	"github.com/agentbus/agentbus/auth"
	"github.com/agentbus/agentbus/events"
	"github.com/agentbus/agentbus/events/eventstest"
	"github.com/agentbus/agentbus/handlers"
	"github.com/agentbus/agentbus/handlers/ingress"
	"github.com/agentbus/agentbus/orch"
	"github.com/agentbus/agentbus/runclient"
)

// unanswered is the message of a run the fake router leaves unanswered.
const unanswered = "never answered"

// newIngress serves the real ingress over a fake router that reports the
// plan's progress on the REPLY stream, streams the answer "hello, world" in two chunks and
// finishes the run, except for a run whose message is unanswered.
func newIngress(t *testing.T) *runclient.HTTP {
	t.Helper()
	return newIngressWith(t, func(jetstream.JetStream) ingress.IngressConfig { return ingress.IngressConfig{} })
}

// newIngressWith is newIngress with the ingress configuration cfg returns.
func newIngressWith(t *testing.T, cfg func(jetstream.JetStream) ingress.IngressConfig) *runclient.HTTP {
	t.Helper()
	topo := eventstest.TestTopology()
	topo.Buckets = handlers.Buckets
	_, nc, js := eventstest.Bootstrap(t, topo)
	fakeRouter(t, nc, func(ev event.Event, req orch.RunRequest) {
		if req.Message == unanswered {
			return
		}
		// The roles publish a streaming run's progress on the REPLY stream.
		publish(t, js, ev, "progress", events.TypeReplyChunk, runclient.Chunk{MessageID: "p1",
			SessionID: req.SessionID, MessageType: "progress", Content: `plan.received {"steps":2}`, EndOfMessage: true})
		for i, part := range []string{"hello, ", "world"} {
			publish(t, js, ev, fmt.Sprint("chunk", i), events.TypeReplyChunk, runclient.Chunk{MessageID: "m1",
				SessionID: req.SessionID, MessageType: "answer", Content: part, EndOfMessage: i == 1})
		}
		finish(t, js, ev, req, "1", "hello, world")
	})
	conf := cfg(js)
	conf.RunTimeout = 300 * time.Millisecond
	g := ingress.NewIngress(js, nil, zerolog.Nop(), conf)
	if err := g.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(g.Stop)
	srv := httptest.NewServer(g.Handler())
	t.Cleanup(srv.Close)
	return runclient.NewHTTP(srv.URL+"/", nil)
}

func publish(t *testing.T, js jetstream.JetStream, parent event.Event, key, typ string, data any) {
	ev, err := events.Child(parent, key, typ, data)
	if err == nil {
		err = events.Publish(context.Background(), js, ev)
	}
	if err != nil {
		t.Error(err)
	}
}

func TestHTTPRun(t *testing.T) {
	api := newIngress(t)
	res, err := api.Run(testCtx(t), request("ignored"))
	if err != nil {
		t.Fatal(err)
	}
	if res.RunID == "" || res.RunID == "ignored" || res.Response != "hello, world" || res.PlanID != "plan-"+res.RunID ||
		res.TerminalCode != orch.CodeSuccess || res.TenantID != "acme" || res.SessionID != "s1" {
		t.Errorf("Run = %+v; want the ingress's run id and the run's result", res)
	}
}

func TestHTTPStream(t *testing.T) {
	api := newIngress(t)
	var progress, answer []string
	res, err := api.Stream(testCtx(t), request(""), func(c runclient.Chunk) {
		switch c.MessageType {
		case "progress":
			progress = append(progress, c.Content)
		case "answer":
			answer = append(answer, c.Content)
		default:
			t.Errorf("chunk %+v before the last", c)
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	if res.Response != "hello, world" || res.TerminalCode != orch.CodeSuccess {
		t.Errorf("Stream = %+v", res)
	}
	if strings.Join(answer, "") != "hello, world" {
		t.Errorf("answer chunks %q, want hello, world", answer)
	}
	if len(progress) != 1 || !strings.HasPrefix(progress[0], "plan.received ") {
		t.Errorf("progress chunks %q, want plan.received", progress)
	}
}

// TestHTTPCredential: a client with a tenant's API key is admitted, one
// without is refused with the ingress's 401.
func TestHTTPCredential(t *testing.T) {
	var key string
	api := newIngressWith(t, func(js jetstream.JetStream) ingress.IngressConfig {
		keys, err := auth.NewKeys(testCtx(t), js)
		if err != nil {
			t.Fatal(err)
		}
		if key, _, err = keys.Create(testCtx(t), "acme", ""); err != nil {
			t.Fatal(err)
		}
		return ingress.IngressConfig{Auth: auth.Select(keys, nil)}
	})
	res, err := api.WithCredential(key).Run(testCtx(t), request(""))
	if err != nil || res.Response != "hello, world" || res.TenantID != "acme" {
		t.Errorf("Run with a key = %+v, %v", res, err)
	}
	_, err = api.Run(testCtx(t), request(""))
	var serr *runclient.StatusError
	if !errors.As(err, &serr) || serr.StatusCode != http.StatusUnauthorized || serr.Code != "unauthorized" {
		t.Errorf("Run without a key = %v, want 401 unauthorized", err)
	}
}

func TestHTTPErrors(t *testing.T) {
	api := newIngress(t)
	invalid := request("")
	invalid.Message = " "
	slow := request("")
	slow.Message = unanswered
	noChunks := func(c runclient.Chunk) {}
	cases := []struct {
		name     string
		call     func() error
		status   int
		code     string
		contains string
	}{
		{name: "invalid request", status: 400, code: "invalid_request",
			call: func() error { _, err := api.Run(testCtx(t), invalid); return err }},
		{name: "invalid streamed request", status: 400, code: "invalid_request",
			call: func() error { _, err := api.Stream(testCtx(t), invalid, noChunks); return err }},
		{name: "run timeout", status: 504, code: "run_timeout",
			call: func() error { _, err := api.Run(testCtx(t), slow); return err }},
		{name: "streamed run timeout", contains: "run_timeout",
			call: func() error { _, err := api.Stream(testCtx(t), slow, noChunks); return err }},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.call()
			var refused *runclient.StatusError
			switch {
			case err == nil:
				t.Fatal("no error")
			case tc.status != 0 && (!errors.As(err, &refused) || refused.StatusCode != tc.status || refused.Code != tc.code || refused.Message == ""):
				t.Errorf("error %v, want status %d code %s with a message", err, tc.status, tc.code)
			case tc.contains != "" && !strings.Contains(err.Error(), tc.contains):
				t.Errorf("error %v, want %q", err, tc.contains)
			}
		})
	}
}

// TestHTTPStreamWithoutResult: a stream cut before its last chunk is an
// error, not an empty result.
func TestHTTPStreamWithoutResult(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		fmt.Fprint(w, "id: 1\nevent: chunk\ndata: {\"message_type\":\"progress\",\"content\":\"step_1.started\"}\n\n")
	}))
	t.Cleanup(srv.Close)
	var got []runclient.Chunk
	_, err := runclient.NewHTTP(srv.URL, nil).Stream(testCtx(t), request(""), func(c runclient.Chunk) { got = append(got, c) })
	if !errors.Is(err, runclient.ErrNoResult) || len(got) != 1 {
		t.Errorf("Stream = %v after %d chunks; want ErrNoResult after 1", err, len(got))
	}
}

// TestHTTPStreamResumesAfterADrop: a stream cut before its result is
// resumed with GET /agent/runs/{run_id}/stream and the last chunk's id as
// Last-Event-ID: the caller sees every chunk once, then the result.
func TestHTTPStreamResumesAfterADrop(t *testing.T) {
	chunk := func(w http.ResponseWriter, id int, typ, content string, end bool) {
		b, _ := json.Marshal(runclient.Chunk{MessageID: "m", MessageType: typ, Content: content, EndOfDialog: end})
		fmt.Fprintf(w, "id: %d\nevent: chunk\ndata: %s\n\n", id, b)
	}
	var resumedAfter string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		switch {
		case r.Method == http.MethodPost && r.URL.Path == "/agent/run":
			w.Header().Set("X-Run-Id", "run-1")
			chunk(w, 1, "progress", "step_1.started", false)
			chunk(w, 2, "answer", "hello, ", false)
			// the connection drops here
		case r.Method == http.MethodGet && r.URL.Path == "/agent/runs/run-1/stream" && r.Header.Get("X-Tenant-Id") == "acme":
			resumedAfter = r.Header.Get("Last-Event-ID")
			chunk(w, 3, "answer", "world", false)
			chunk(w, 4, "result", `{"run_id":"run-1","response":"hello, world","status":"complete","terminal_code":"SUCCESS"}`, true)
		default:
			w.WriteHeader(http.StatusNotFound)
		}
	}))
	t.Cleanup(srv.Close)
	var got []string
	res, err := runclient.NewHTTP(srv.URL, nil).Stream(testCtx(t), request(""), func(c runclient.Chunk) { got = append(got, c.Content) })
	if err != nil || res.Response != "hello, world" || res.TerminalCode != orch.CodeSuccess {
		t.Fatalf("Stream = %+v, %v", res, err)
	}
	if resumedAfter != "2" || strings.Join(got, "|") != "step_1.started|hello, |world" {
		t.Fatalf("resumed after %q; chunks %q", resumedAfter, got)
	}
}

// TestHTTPCancel: Cancel posts to the run's cancel endpoint with the
// tenant and the credential, reads the 202 answer, and reports a refusal
// as a *StatusError naming the request.
func TestHTTPCancel(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		if r.Method != http.MethodPost || r.URL.Path != "/agent/runs/run-1/cancel" || r.Header.Get("Authorization") != "Bearer k" {
			t.Errorf("request %s %s (authorization %q)", r.Method, r.URL.Path, r.Header.Get("Authorization"))
		}
		if r.Header.Get("X-Tenant-Id") != "acme" {
			w.WriteHeader(http.StatusNotFound)
			fmt.Fprint(w, `{"error":{"code":"not_found","message":"run not found"}}`)
			return
		}
		w.WriteHeader(http.StatusAccepted)
		fmt.Fprint(w, `{"run_id":"run-1","plan_id":"plan-1","status":"cancelling"}`)
	}))
	t.Cleanup(srv.Close)
	api := runclient.NewHTTP(srv.URL, nil).WithCredential("k")
	res, err := api.Cancel(testCtx(t), "acme", "run-1")
	if err != nil || res != (runclient.CancelResponse{RunID: "run-1", PlanID: "plan-1", Status: runclient.StatusCancelling}) {
		t.Errorf("Cancel = %+v, %v", res, err)
	}
	_, err = api.Cancel(testCtx(t), "beta", "run-1")
	var refused *runclient.StatusError
	if !errors.As(err, &refused) || refused.StatusCode != http.StatusNotFound || refused.Code != "not_found" ||
		!strings.Contains(err.Error(), "POST /agent/runs/run-1/cancel") {
		t.Errorf("Cancel of another tenant's run = %v, want 404 not_found naming the request", err)
	}
}
