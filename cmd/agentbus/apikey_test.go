package main

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	json "github.com/go-json-experiment/json/v1"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"

	"github.com/agentbus/agentbus/cmd/internal/app"
	"github.com/agentbus/agentbus/cmd/internal/procs"
	"github.com/agentbus/agentbus/events"
	"github.com/agentbus/agentbus/handlers"
	"github.com/agentbus/agentbus/orch"
	"github.com/agentbus/agentbus/runclient"
	"github.com/agentbus/agentbus/skills/demo"
	"github.com/agentbus/agentbus/store"
)

// keyRecorder records the X-Api-Key of every request to the Skill Service.
type keyRecorder struct {
	mu   sync.Mutex
	keys map[string]int
}

func (k *keyRecorder) wrap(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		k.mu.Lock()
		k.keys[r.Header.Get("X-Api-Key")]++
		k.mu.Unlock()
		next.ServeHTTP(w, r)
	})
}

// TestAPIKeyForwardedToSkillsAndNeverRecorded: the caller's X-Api-Key
// reaches every Skill Service request of its run, and the model provider's
// key every provider request; neither appears in a log line (debug level),
// a stored event of any stream or an audit document, and the caller's key
// is no longer in the credentials bucket once the run has ended.
func TestAPIKeyForwardedToSkillsAndNeverRecorded(t *testing.T) {
	const secret = "sk-agentbus-test-4f1d9c0e7b2a"
	rec := &keyRecorder{keys: map[string]int{}}
	skillSrv := httptest.NewServer(rec.wrap(demo.NewService(demo.Config{}).Handler()))
	defer skillSrv.Close()
	chat := chatServer(t, "demo_conversation.json", nil)
	keyFile := filepath.Join(t.TempDir(), "model.key")
	if err := os.WriteFile(keyFile, []byte(modelKey+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	models := app.ModelConfig{Default: "openai:test-model", BaseURL: chat.URL, KeyFile: keyFile, MaxTokens: 1024}
	if err := models.Validate(); err != nil {
		t.Fatal(err)
	}
	var logs procs.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	s, err := app.StartStack(ctx, held(t, app.StackConfig{DataDir: t.TempDir(), NATSPort: -1, HTTPAddr: "127.0.0.1:0",
		SkillsURL: skillSrv.URL + "/tenants/{tenant}/mcp", Log: zerolog.New(&logs).Level(zerolog.DebugLevel),
		Process: app.Config{AckWait: 2 * time.Second, LogLevel: "debug", Models: models}}))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()

	body, _ := json.Marshal(runclient.Request{TenantID: "demo", UserID: "u", SessionID: "s-key", Message: demoTask})
	req, _ := http.NewRequest(http.MethodPost, "http://"+s.IngressAddr+"/agent/run", bytes.NewReader(body))
	req.Header.Set("X-Api-Key", secret)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	var res runclient.Response
	_ = json.NewDecoder(resp.Body).Decode(&res)
	resp.Body.Close()
	if res.TerminalCode != orch.CodeSuccess {
		t.Fatalf("run ended %q: %s", res.TerminalCode, res.Response)
	}
	for _, r := range chat.Received() {
		if r.Authorization != "Bearer "+modelKey {
			t.Fatalf("a %s request to the provider carried %q, not the configured key", r.Task, r.Authorization)
		}
	}

	rec.mu.Lock()
	forwarded, other := rec.keys[secret], len(rec.keys)
	rec.mu.Unlock()
	if forwarded == 0 || other != 1 {
		t.Fatalf("Skill Service saw keys %v; want every request to carry the caller's key", rec.keys)
	}

	// The trace is indexed once the run has finished; wait for it.
	var trace []store.Event
	eventually(t, 10*time.Second, "the trace", func() bool {
		trace, err = s.Deps.Store.Trace(ctx, store.TraceQuery{TenantID: "demo", SessionID: "s-key"})
		return err == nil && len(trace) > 0 && trace[len(trace)-1].EventType == "run.finished"
	})
	for _, key := range []string{secret, modelKey} {
		for _, e := range trace {
			if b, _ := json.Marshal(e); bytes.Contains(b, []byte(key)) {
				t.Fatalf("audit document %s holds a key", e.EventType)
			}
		}
		for _, stream := range []string{events.StreamAgent, events.StreamReply} {
			if n := rawContains(t, s.Deps.JS, stream, key); n > 0 {
				t.Fatalf("%d messages of stream %s hold a key", n, stream)
			}
		}
	}
	creds, err := s.Deps.JS.KeyValue(ctx, handlers.BucketCredentials)
	if err != nil {
		t.Fatal(err)
	}
	if keys, _ := creds.Keys(ctx); len(keys) != 0 {
		t.Fatalf("credentials bucket still holds %d keys after the run ended", len(keys))
	}
	if l := logs.String(); strings.Contains(l, secret) || strings.Contains(l, modelKey) || !strings.Contains(l, "run requested") {
		t.Fatalf("logs hold the key, or logging was not captured (%d bytes)", len(l))
	}
}

// rawContains counts the stored messages of stream whose headers or data
// contain s.
func rawContains(t *testing.T, js jetstream.JetStream, stream, s string) int {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := js.OrderedConsumer(ctx, stream, jetstream.OrderedConsumerConfig{})
	if err != nil {
		t.Fatal(err)
	}
	n, seen := 0, 0
	for {
		msg, err := c.Next(jetstream.FetchMaxWait(300 * time.Millisecond))
		if err != nil {
			break
		}
		seen++
		hdr, _ := json.Marshal(msg.Headers())
		if bytes.Contains(msg.Data(), []byte(s)) || bytes.Contains(hdr, []byte(s)) {
			n++
		}
	}
	if seen == 0 && stream == events.StreamAgent {
		t.Fatalf("stream %s is empty: nothing was checked", stream)
	}
	return n
}
