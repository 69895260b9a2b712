package skills_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	json "github.com/go-json-experiment/json/v1"

	"github.com/agentbus/agentbus/skills"
	"github.com/agentbus/agentbus/skills/demo"
)

// methodCounter is a wrapping handler that counts JSON-RPC methods per path
// and can fail the next tools/call with a non-JSON 502.
type methodCounter struct {
	mu       sync.Mutex
	counts   map[string]int // "path method" -> requests
	failNext atomic.Bool
}

func (m *methodCounter) wrap(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		r.Body = io.NopCloser(bytes.NewReader(body))
		var msg struct {
			Method string `json:"method"`
		}
		_ = json.Unmarshal(body, &msg)
		m.mu.Lock()
		m.counts[r.URL.Path+" "+msg.Method]++
		m.mu.Unlock()
		if msg.Method == "tools/call" && m.failNext.CompareAndSwap(true, false) {
			http.Error(w, "upstream unavailable", http.StatusBadGateway)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// handshakes returns how many session set-ups (discover or initialize) hit path.
func (m *methodCounter) handshakes(path string) int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.counts[path+" server/discover"] + m.counts[path+" initialize"]
}

// count returns the requests of "path method" so far.
func (m *methodCounter) count(key string) int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.counts[key]
}

func TestSessionReusedPerTenant(t *testing.T) {
	mc := &methodCounter{counts: map[string]int{}}
	env := newTestEnv(t, demo.Config{}, skills.Config{}, mc.wrap)
	ctx := testCtx(t)

	var wg sync.WaitGroup
	errs := make(chan error, 20)
	for i := range 20 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			tenant := []string{"acme", "beta"}[i%2]
			if _, err := env.client.Call(ctx, tenant, demo.SkillOutletList, nil, ""); err != nil {
				errs <- err
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	for _, tenant := range []string{"acme", "beta"} {
		if n := mc.handshakes("/tenants/" + tenant + "/mcp"); n != 1 {
			t.Fatalf("tenant %s: %d session handshakes, want 1", tenant, n)
		}
	}
}

func TestSessionRecreatedAfterTransportError(t *testing.T) {
	mc := &methodCounter{counts: map[string]int{}}
	env := newTestEnv(t, demo.Config{}, skills.Config{}, mc.wrap)
	ctx := testCtx(t)
	const path = "/tenants/beta/mcp"

	if _, err := env.client.Call(ctx, "beta", demo.SkillOutletList, nil, "a"); err != nil {
		t.Fatal(err)
	}
	mc.failNext.Store(true)
	if _, err := env.client.Call(ctx, "beta", demo.SkillOutletList, nil, "b"); err != nil {
		t.Fatalf("call after transport failure: %v", err)
	}
	if n := mc.handshakes(path); n != 2 {
		t.Fatalf("%d session handshakes, want 2 (initial + re-created)", n)
	}
	if got := env.svc.Invocations(); got["a"] != 1 || got["b"] != 1 {
		t.Fatalf("Invocations() = %v", got)
	}
}

func TestCallTimeout(t *testing.T) {
	env := newTestEnv(t, demo.Config{Latency: 2 * time.Second}, skills.Config{Timeout: 300 * time.Millisecond}, nil)
	start := time.Now()
	_, err := env.client.Call(context.Background(), "beta", demo.SkillOutletList, nil, "slow")
	if err == nil {
		t.Fatal("expected a timeout error")
	}
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Logf("timeout error (not DeadlineExceeded): %v", err)
	}
	if d := time.Since(start); d > 1500*time.Millisecond {
		t.Fatalf("call took %v despite 300ms timeout", d)
	}
	// The call was abandoned during its latency, before its effect: the
	// service sees its caller give up (or, were the cancel lost, executes
	// it once the latency has passed), and the skill has executed nothing.
	deadline := time.Now().Add(5 * time.Second)
	for env.svc.Abandoned(demo.SkillOutletList) == 0 && env.svc.Calls(demo.SkillOutletList) == 0 {
		if time.Now().After(deadline) {
			t.Fatal("the service neither saw the call given up nor executed it")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if n := env.svc.Calls(demo.SkillOutletList); n != 0 {
		t.Fatalf("outlet_list executed %d times, want 0", n)
	}
}

func TestClientClose(t *testing.T) {
	env := newTestEnv(t, demo.Config{}, skills.Config{}, nil)
	ctx := testCtx(t)
	if _, err := env.client.Find(ctx, "beta", "outlets", 1); err != nil {
		t.Fatal(err)
	}
	if err := env.client.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := env.client.Find(ctx, "beta", "outlets", 1); !errors.Is(err, skills.ErrClosed) {
		t.Fatalf("Find after Close err = %v, want ErrClosed", err)
	}
}

// A new session makes its first call only once the server has answered
// its standalone GET stream: a server that took a GET arriving after a
// call for that call's reconnection would answer the call on the stream,
// where the client reads no responses.
func TestSessionCallsAfterItsStreamIsAnswered(t *testing.T) {
	var streamServed, callBeforeStream atomic.Bool
	calls := atomic.Int32{}
	slowStream := func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.Method == http.MethodGet {
				time.Sleep(300 * time.Millisecond) // a server slow to open the stream
				streamServed.Store(true)
			} else {
				body, _ := io.ReadAll(r.Body)
				r.Body = io.NopCloser(bytes.NewReader(body))
				if bytes.Contains(body, []byte(`"tools/call"`)) {
					calls.Add(1)
					if !streamServed.Load() {
						callBeforeStream.Store(true)
					}
				}
			}
			next.ServeHTTP(w, r)
		})
	}
	env := newTestEnv(t, demo.Config{}, skills.Config{}, slowStream)
	if _, err := env.client.Call(testCtx(t), "acme", demo.SkillOutletList, nil, ""); err != nil {
		t.Fatal(err)
	}
	if calls.Load() != 1 || callBeforeStream.Load() {
		t.Fatalf("%d calls, one before the stream was answered: %v", calls.Load(), callBeforeStream.Load())
	}
}
