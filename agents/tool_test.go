package agents

import (
	"errors"
	"strconv"
	"testing"
	"time"

	json "github.com/go-json-experiment/json/v1"

	"github.com/agentbus/agentbus/schema"
)

// TestVerifyWebhook: a receiver accepts a request signed with its secret
// within the window once, and refuses a wrong secret, a changed body, a
// missing or stale timestamp and a replay.
func TestVerifyWebhook(t *testing.T) {
	secret, body := []byte("whsec-0123456789abcdef"), []byte(`{"tool":"lookup_order","arguments":{}}`)
	now := time.Unix(1_800_000_000, 0)
	ts := now.Add(-time.Minute).Unix()
	sig := SignWebhook(secret, ts, body)
	tsHeader := strconv.FormatInt(ts, 10)
	var guard ReplayGuard
	if err := VerifyWebhook(secret, tsHeader, sig, body, now, 0, &guard); err != nil {
		t.Fatalf("valid request: %v", err)
	}
	for _, c := range []struct {
		name      string
		secret    []byte
		ts, sig   string
		body      []byte
		now       time.Time
		want      error
		withGuard bool
	}{
		{"replay", secret, tsHeader, sig, body, now, ErrWebhookReplay, true},
		{"wrong secret", []byte("another-secret-0000"), tsHeader, sig, body, now, ErrWebhookSignature, false},
		{"changed body", secret, tsHeader, sig, []byte(`{"tool":"x"}`), now, ErrWebhookSignature, false},
		{"changed timestamp", secret, strconv.FormatInt(ts+1, 10), sig, body, now, ErrWebhookSignature, false},
		{"no signature", secret, tsHeader, "", body, now, ErrWebhookSignature, false},
		{"no timestamp", secret, "", sig, body, now, ErrWebhookTimestamp, false},
		{"stale", secret, tsHeader, sig, body, now.Add(10 * time.Minute), ErrWebhookTimestamp, false},
		{"from the future", secret, tsHeader, sig, body, now.Add(-10 * time.Minute), ErrWebhookTimestamp, false},
	} {
		var g *ReplayGuard
		if c.withGuard {
			g = &guard
		}
		if err := VerifyWebhook(c.secret, c.ts, c.sig, c.body, c.now, DefaultReplayWindow, g); !errors.Is(err, c.want) {
			t.Errorf("%s: %v, want %v", c.name, err, c.want)
		}
	}
	// A rotated key: either of two signatures verifies.
	if err := VerifyWebhook(secret, tsHeader, SignWebhook([]byte("old-secret-0000000"), ts, body)+", "+sig, body, now, 0, nil); err != nil {
		t.Fatalf("two signatures: %v", err)
	}
}

// TestToolDefaults: normalized defaults and the retry rule: only an
// idempotent tool is retried.
func TestToolDefaults(t *testing.T) {
	s := ToolSpec{Name: "lookup_order", Description: "d", Parameters: json.RawMessage(`{"type":"object"}`),
		Handler: ToolHandler{URL: "https://hooks.example.com/x"}}
	s.Normalize()
	if err := s.Validate(); err != nil {
		t.Fatal(err)
	}
	if s.Status != StatusActive || s.Handler.Type != HandlerWebhook || s.Handler.Timeout() != DefaultToolTimeout || s.Handler.Retries() != 0 {
		t.Fatalf("defaults %+v", s)
	}
	s.Handler.Idempotent = true
	s.Normalize()
	if s.Handler.Retries() != DefaultToolRetries || s.Handler.Backoff() != DefaultToolBackoff {
		t.Fatalf("idempotent defaults %+v", s.Handler)
	}
	zero := 0
	s.Handler.MaxRetries = &zero
	if s.Handler.Retries() != 0 {
		t.Fatal("max_retries 0 retries")
	}
	for _, st := range SystemTools {
		if _, err := schema.Compile(st.Parameters); err != nil || !IsSystemTool(st.Name) || st.Type != ToolTypeSystem {
			t.Fatalf("system tool %s: %v", st.Name, err)
		}
	}
	if IsSystemTool("lookup_order") || !IsSystemTool("Send_Message") {
		t.Fatal("IsSystemTool")
	}
}
