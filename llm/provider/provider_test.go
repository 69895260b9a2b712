package provider

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/agentbus/agentbus/llm"
)

func TestParse(t *testing.T) {
	for spec, want := range map[string][2]string{
		"offline":                   {"offline", ""},
		" openai:gpt-4.1-mini ":     {"openai", "gpt-4.1-mini"},
		"anthropic:claude-sonnet-4": {"anthropic", "claude-sonnet-4"},
		"bedrock:anthropic.claude-3-5-haiku-20241022-v1:0": {"bedrock", "anthropic.claude-3-5-haiku-20241022-v1:0"},
	} {
		name, model, err := Parse(spec)
		if err != nil || name != want[0] || model != want[1] {
			t.Errorf("Parse(%q) = %q, %q, %v; want %q, %q", spec, name, model, err, want[0], want[1])
		}
	}
	for _, spec := range []string{"", "openai", "openai:", "offline:x", "gemini:pro"} {
		if _, _, err := Parse(spec); !errors.Is(err, ErrSpec) {
			t.Errorf("Parse(%q) = %v, want ErrSpec", spec, err)
		}
	}
}

// A provider that is down answers through the offline fallback, and the
// response says which model answered and why.
func TestOpenFallsBackToOffline(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusServiceUnavailable)
		_, _ = w.Write([]byte(`{"type":"error","error":{"type":"overloaded_error","message":"overloaded"}}`))
	}))
	defer srv.Close()
	pc := llm.ProviderConfig{BaseURL: srv.URL, APIKey: "sk-test", MaxRetries: -1}
	for _, spec := range []string{"openai:test-model", "anthropic:test-model"} {
		m, err := Open(context.Background(), spec, Options{Provider: pc, Fallback: Offline})
		if err != nil {
			t.Fatalf("Open(%s): %v", spec, err)
		}
		resp, err := m.Complete(context.Background(), llm.NewRequest(llm.TaskSynthesize, llm.SynthInput{Task: "say hi"}))
		if err != nil {
			t.Fatalf("%s: %v", spec, err)
		}
		if resp.Provider != Offline || resp.FallbackReason == "" {
			t.Errorf("%s: answered by %q (fallback reason %q), want offline with a reason", spec, resp.Provider, resp.FallbackReason)
		}
		if strings.Contains(resp.FallbackReason, "sk-test") {
			t.Errorf("%s: fallback reason leaks the key: %s", spec, resp.FallbackReason)
		}
	}
	if _, err := Open(context.Background(), "openai:x", Options{Provider: pc, Fallback: "anthropic"}); !errors.Is(err, ErrSpec) {
		t.Errorf("unsupported fallback: %v, want ErrSpec", err)
	}
}

func TestOpenEmbedder(t *testing.T) {
	e, err := OpenEmbedder("offline", llm.ProviderConfig{}, 32)
	if err != nil || e == nil {
		t.Fatalf("offline embedder: %v", err)
	}
	if _, err := OpenEmbedder("anthropic:x", llm.ProviderConfig{}, 32); !errors.Is(err, ErrSpec) {
		t.Errorf("anthropic embedder: %v, want ErrSpec", err)
	}
}
