package provider

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentbus/agentbus/llm"
)

// inFlight is a local server speaking the OpenAI chat-completions and the
// Anthropic messages wire formats that counts the requests it holds at
// once, per provider, and the most it ever held.
type inFlight struct {
	mu        sync.Mutex
	now, peak map[string]int
	total     atomic.Int64
	hold      time.Duration
}

func (s *inFlight) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	p := "openai"
	if strings.HasSuffix(r.URL.Path, "/messages") {
		p = "anthropic"
	}
	s.mu.Lock()
	s.now[p]++
	s.peak[p] = max(s.peak[p], s.now[p])
	s.mu.Unlock()
	s.total.Add(1)
	time.Sleep(s.hold)
	s.mu.Lock()
	s.now[p]--
	s.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	if p == "anthropic" {
		_, _ = w.Write([]byte(`{"id":"msg_1","type":"message","role":"assistant","model":"m","content":[{"type":"text","text":"hi"}],` +
			`"stop_reason":"end_turn","usage":{"input_tokens":3,"output_tokens":1}}`))
		return
	}
	_, _ = w.Write([]byte(`{"id":"c1","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,` +
		`"message":{"role":"assistant","content":"hi"},"finish_reason":"stop"}],"usage":{"prompt_tokens":3,"completion_tokens":1,"total_tokens":4}}`))
}

// TestConcurrencyBoundsCallsInFlightPerProvider: with a bound of 2, ten
// concurrent calls through two OpenAI-compatible models (different ids,
// as two roles would have) never hold more than 2 requests at the
// provider, and Anthropic's calls have their own 2 slots; every call
// still completes, the waits are reported, and a caller whose context
// ends while it waits gives up without reaching the provider.
func TestConcurrencyBoundsCallsInFlightPerProvider(t *testing.T) {
	srv := &inFlight{now: map[string]int{}, peak: map[string]int{}, hold: 150 * time.Millisecond}
	ts := httptest.NewServer(srv)
	defer ts.Close()
	var waits atomic.Int64
	conc := &Concurrency{Max: 2, OnWait: func(p string, d time.Duration) { waits.Add(1) }}
	opts := Options{Provider: llm.ProviderConfig{BaseURL: ts.URL, APIKey: "sk-test", MaxRetries: -1}, Concurrency: conc}
	ctx := context.Background()
	var models []llm.Model
	for _, spec := range []string{"openai:model-a", "openai:model-b", "anthropic:model-c"} {
		m, err := Open(ctx, spec, opts)
		if err != nil {
			t.Fatalf("Open(%s): %v", spec, err)
		}
		models = append(models, m)
	}
	var wg sync.WaitGroup
	errs := make(chan error, 16)
	for i := range 14 {
		m := models[0]
		switch {
		case i >= 10:
			m = models[2]
		case i%2 == 1:
			m = models[1]
		}
		wg.Go(func() {
			if _, err := m.Complete(ctx, llm.NewRequest(llm.TaskSynthesize, llm.SynthInput{Task: "say hi"})); err != nil {
				errs <- err
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Errorf("call failed: %v", err)
	}
	srv.mu.Lock()
	peakOpenAI, peakAnthropic := srv.peak["openai"], srv.peak["anthropic"]
	srv.mu.Unlock()
	if peakOpenAI != 2 || peakAnthropic != 2 {
		t.Fatalf("peak requests in flight: openai %d, anthropic %d; want 2 each (the bound, reached)", peakOpenAI, peakAnthropic)
	}
	if srv.total.Load() != 14 {
		t.Fatalf("provider saw %d requests, want 14", srv.total.Load())
	}
	if waits.Load() < 8 {
		t.Errorf("%d waits reported; 10 OpenAI calls on 2 slots make at least 8 wait", waits.Load())
	}

	// Both OpenAI slots held: a caller with a short deadline gives up.
	slots := conc.For(OpenAI)
	for range slots.Cap() {
		if err := slots.Acquire(ctx); err != nil {
			t.Fatal(err)
		}
	}
	short, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
	defer cancel()
	before := srv.total.Load()
	_, err := models[0].Complete(short, llm.NewRequest(llm.TaskSynthesize, llm.SynthInput{Task: "say hi"}))
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("a waiting call whose context ended returned %v, want its deadline", err)
	}
	if srv.total.Load() != before {
		t.Fatalf("the call that gave up reached the provider")
	}
	for range slots.Cap() {
		slots.Release()
	}
}
