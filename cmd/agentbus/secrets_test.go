package main

import (
	"bytes"
	"context"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"
	json "github.com/go-json-experiment/json/v1"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"

	"github.com/agentbus/agentbus/auth"
	"github.com/agentbus/agentbus/cmd/internal/app"
	"github.com/agentbus/agentbus/cmd/internal/procs"
	"github.com/agentbus/agentbus/events"
	"github.com/agentbus/agentbus/handlers"
	"github.com/agentbus/agentbus/handlers/memory"
	"github.com/agentbus/agentbus/orch"
	"github.com/agentbus/agentbus/runclient"
	"github.com/agentbus/agentbus/skills/demo"
	"github.com/agentbus/agentbus/store"
)

// sessionReader reads agent_sessions; both backends do.
type sessionReader interface {
	GetSession(ctx context.Context, tenantID, sessionID string) (store.Session, error)
}

// TestTenantCredentialsNeverRecorded: runs authenticated with a tenant's
// API key and with a JWT succeed, and neither the key, its secret part,
// its stored hash, the token nor the JWT signing secret appears in a log
// line (debug level), a message of any stream, a stored document (trace,
// plan, session, memory) or a KV bucket other than the key store.
func TestTenantCredentialsNeverRecorded(t *testing.T) {
	const hsSecret = "agentbus-test-hs256-secret-6b1f0c9d8e7a"
	var logs procs.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	s, err := app.StartStack(ctx, held(t, app.StackConfig{DataDir: t.TempDir(), NATSPort: -1, HTTPAddr: "127.0.0.1:0",
		Log: zerolog.New(&logs).Level(zerolog.DebugLevel), Skills: demo.NewService(demo.Config{}).Handler(),
		Ingress: app.IngressOptions{APIKeys: true, JWT: auth.JWTConfig{HS256Secret: []byte(hsSecret)}},
		Process: app.Config{AckWait: 2 * time.Second, LogLevel: "debug"}}))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	keys, err := auth.NewKeys(ctx, s.Deps.JS)
	if err != nil {
		t.Fatal(err)
	}
	apiKey, rec, err := keys.Create(ctx, "demo", "u-key")
	if err != nil {
		t.Fatal(err)
	}
	kv, err := s.Deps.JS.KeyValue(ctx, auth.KeyBucket)
	if err != nil {
		t.Fatal(err)
	}
	entry, err := kv.Get(ctx, rec.KeyID)
	if err != nil {
		t.Fatal(err)
	}
	var stored struct {
		Hash string `json:"hash"`
	}
	if err := json.Unmarshal(entry.Value(), &stored); err != nil || !strings.HasPrefix(stored.Hash, "$hmac-sha256$") {
		t.Fatalf("stored key record %s (%v): no keyed hash", entry.Value(), err)
	}
	signer, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.HS256, Key: []byte(hsSecret)}, (&jose.SignerOptions{}).WithType("JWT"))
	if err != nil {
		t.Fatal(err)
	}
	token, err := jwt.Signed(signer).Claims(map[string]any{"tenant_id": "demo", "user_id": "u-jwt",
		"exp": time.Now().Add(time.Hour).Unix()}).Serialize()
	if err != nil {
		t.Fatal(err)
	}

	for _, c := range []struct{ credential, session string }{{apiKey, "s-apikey"}, {token, "s-jwt"}} {
		body, _ := json.Marshal(runclient.Request{SessionID: c.session, Message: demoTask})
		req, _ := http.NewRequest(http.MethodPost, "http://"+s.IngressAddr+"/agent/run", bytes.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+c.credential)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		var res runclient.Response
		_ = json.NewDecoder(resp.Body).Decode(&res)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || res.TerminalCode != orch.CodeSuccess {
			t.Fatalf("run of session %s: HTTP %d, %q: %s", c.session, resp.StatusCode, res.TerminalCode, res.Response)
		}
	}

	_, keySecret, _ := strings.Cut(strings.TrimPrefix(apiKey, "abk_"+rec.KeyID), "_")
	secrets := map[string]string{"api key": apiKey, "key secret": keySecret, "key hash": stored.Hash,
		"jwt": token, "jwt signature": token[strings.LastIndex(token, ".")+1:], "hs256 secret": hsSecret}
	if len(keySecret) < 16 {
		t.Fatalf("could not take the secret part of %q", apiKey)
	}

	var docs []any
	for _, session := range []string{"s-apikey", "s-jwt"} {
		var trace []store.Event
		eventually(t, 10*time.Second, "the trace of "+session, func() bool {
			trace, err = s.Deps.Store.Trace(ctx, store.TraceQuery{TenantID: "demo", SessionID: session})
			return err == nil && len(trace) > 0 && trace[len(trace)-1].EventType == "run.finished"
		})
		plan, _, err := s.Deps.Store.GetPlan(ctx, "demo", trace[0].PlanID)
		if err != nil {
			t.Fatal(err)
		}
		var sess store.Session
		eventually(t, 10*time.Second, "the session projection of "+session, func() bool {
			sess, err = s.Deps.Store.(sessionReader).GetSession(ctx, "demo", session)
			return err == nil
		})
		docs = append(docs, trace, plan, sess)
		for _, st := range plan.Steps {
			m, err := s.Deps.Store.GetMemory(ctx, st.MemoryKey)
			if err != nil {
				t.Fatal(err)
			}
			docs = append(docs, m)
		}
	}
	hits, err := s.Deps.Store.QueryMemory(ctx, store.MemoryQuery{TenantID: "demo", Scope: memory.ScopeUser,
		Vector: make([]float32, s.Deps.Embedder.Dimension()), TopK: 100})
	if err != nil || len(hits) != 2 {
		t.Fatalf("the users' memory holds %d exchanges (%v), want 2", len(hits), err)
	}
	docs = append(docs, hits)

	// Every stream of the server: the event streams, the KV buckets and
	// the embedded store's documents; only the key store holds the hash.
	var streams []string
	names := s.Deps.JS.StreamNames(ctx)
	for name := range names.Name() {
		if name != "KV_"+auth.KeyBucket {
			streams = append(streams, name)
		}
	}
	if names.Err() != nil || !slices.Contains(streams, events.StreamReply) || !slices.Contains(streams, "KV_"+handlers.BucketSessions) {
		t.Fatalf("streams %v (%v)", streams, names.Err())
	}
	var messages [][]byte // every message of every stream, headers and data
	for _, stream := range streams {
		messages = append(messages, streamMessages(t, s.Deps.JS, stream)...)
	}
	for what, secret := range secrets {
		for _, d := range docs {
			if b, _ := json.Marshal(d); bytes.Contains(b, []byte(secret)) {
				t.Fatalf("a stored document holds the %s: %.200s", what, b)
			}
		}
		for _, m := range messages {
			if bytes.Contains(m, []byte(secret)) {
				t.Fatalf("a stream message holds the %s: %.200s", what, m)
			}
		}
		if strings.Contains(logs.String(), secret) {
			t.Fatalf("the logs hold the %s", what)
		}
	}
	if !strings.Contains(logs.String(), "run requested") {
		t.Fatal("logging was not captured")
	}
}

// streamMessages returns the headers and data of every message of stream.
func streamMessages(t *testing.T, js jetstream.JetStream, stream string) [][]byte {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := js.OrderedConsumer(ctx, stream, jetstream.OrderedConsumerConfig{})
	if err != nil {
		t.Fatal(err)
	}
	info, err := c.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var out [][]byte
	for range info.NumPending {
		msg, err := c.Next(jetstream.FetchMaxWait(2 * time.Second))
		if err != nil {
			t.Fatalf("stream %s: %v", stream, err)
		}
		hdr, _ := json.Marshal(msg.Headers())
		out = append(out, append(hdr, msg.Data()...))
	}
	return out
}
