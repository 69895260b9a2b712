package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	json "github.com/go-json-experiment/json/v1"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"

	"github.com/agentbus/agentbus/cmd/internal/app"
	"github.com/agentbus/agentbus/events"
	"github.com/agentbus/agentbus/handlers"
	"github.com/agentbus/agentbus/orch"
	"github.com/agentbus/agentbus/skills/demo"
	"github.com/agentbus/agentbus/store"
)

// outageProxy forwards TCP to a target and can go down: while down it
// refuses new connections and cuts the open ones, which is what a stopped
// OpenSearch looks like to agentbus. The real node keeps serving the other
// tests that share it.
type outageProxy struct {
	target  string
	ln      net.Listener
	mu      sync.Mutex
	conns   map[net.Conn]bool
	down    bool
	refused int // connections refused while down
}

func startProxy(t *testing.T, target string) *outageProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &outageProxy{target: target, ln: ln, conns: map[net.Conn]bool{}}
	go p.serve()
	t.Cleanup(func() { ln.Close(); p.setDown(true) })
	return p
}

func (p *outageProxy) serve() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.mu.Lock()
		down := p.down
		if down {
			p.refused++
		} else {
			p.conns[c] = true
		}
		p.mu.Unlock()
		if down {
			c.Close()
			continue
		}
		go p.pipe(c)
	}
}

func (p *outageProxy) pipe(c net.Conn) {
	u, err := net.Dial("tcp", p.target)
	if err != nil {
		c.Close()
		return
	}
	p.mu.Lock()
	p.conns[u] = true
	p.mu.Unlock()
	go func() { _, _ = io.Copy(u, c); u.Close() }()
	_, _ = io.Copy(c, u)
	c.Close()
}

// setDown cuts every connection and refuses new ones, or lets them in again.
func (p *outageProxy) setDown(down bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.down = down
	if down {
		for c := range p.conns {
			c.Close()
		}
		p.conns = map[net.Conn]bool{}
	}
}

// TestOpenSearchOutageLosesNoAuditEvent runs agentbus on the real
// OpenSearch node (STORE=opensearch) and takes OpenSearch away in the
// middle of a run for several seconds. The run completes, and every audit
// event of the run ends up indexed exactly once.
func TestOpenSearchOutageLosesNoAuditEvent(t *testing.T) {
	node := "127.0.0.1:9200"
	if resp, err := http.Get("http://" + node); err != nil {
		t.Fatalf("OpenSearch is not reachable at %s (run `make opensearch`): %v", node, err)
	} else {
		resp.Body.Close()
	}
	proxy := startProxy(t, node)
	prefix := fmt.Sprintf("outage%d_", time.Now().UnixNano())
	t.Setenv("OPENSEARCH_URL", "http://"+proxy.ln.Addr().String())
	t.Setenv("OPENSEARCH_DIMENSION", "64")
	t.Cleanup(func() { deleteIndices(node, prefix) })

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	svc := demo.NewService(demo.Config{Latency: 1500 * time.Millisecond})
	s, err := app.StartStack(ctx, held(t, app.StackConfig{DataDir: t.TempDir(), NATSPort: -1, HTTPAddr: "127.0.0.1:0",
		Log: zerolog.Nop(), Skills: svc.Handler(),
		Process: app.Config{Store: "opensearch", StorePrefix: prefix, AckWait: 5 * time.Second}}))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()

	done := make(chan orch.RunResult, 1)
	go func() {
		done <- postRun(t, "http://"+s.IngressAddr, orch.RunRequest{TenantID: "demo", UserID: "u", SessionID: "s-outage", Message: demoTask})
	}()
	eventually(t, 30*time.Second, "the run's first skill call", func() bool { return svc.Waiting(demo.SkillOutletList) > 0 })
	proxy.setDown(true)
	time.Sleep(6 * time.Second)
	proxy.mu.Lock()
	refused := proxy.refused
	proxy.mu.Unlock()
	proxy.setDown(false)
	if refused == 0 {
		t.Fatal("agentbus never tried OpenSearch during the outage: the test proved nothing")
	}

	var res orch.RunResult
	select {
	case res = <-done:
		if res.TerminalCode != orch.CodeSuccess {
			t.Fatalf("run ended %s: %s", res.TerminalCode, res.Response)
		}
	case <-time.After(90 * time.Second):
		t.Fatal("the run did not complete after OpenSearch came back")
	}

	// Every audit event the run produced is in agent_events exactly once;
	// its plan snapshots went to agent_plans, the last one included.
	want := auditIDs(t, s.Deps.JS, events.AuditType(handlers.AuditPlanProjected))
	if p, _ := finalPlan(t, s, res.TenantID, res.PlanID); p.Status != store.PlanStatusComplete {
		t.Fatalf("plan projection %s after the outage, want complete", p.Status)
	}
	if len(want) < 10 {
		t.Fatalf("only %d audit events in the stream", len(want))
	}
	var got map[string]int
	eventually(t, 60*time.Second, "every audit event to be indexed", func() bool {
		got = indexedIDs(node, prefix+"agent_events", "s-outage")
		return len(got) >= len(want)
	})
	for id := range want {
		if got[id] != 1 {
			t.Fatalf("audit event %s indexed %d times", id, got[id])
		}
	}
	if len(got) != len(want) {
		t.Fatalf("%d documents indexed for %d audit events", len(got), len(want))
	}
}

// auditIDs returns the ids of the audit events the AGENT stream holds (in
// its outputs' trails, or on their own), but those of type except.
func auditIDs(t *testing.T, js jetstream.JetStream, except string) map[string]bool {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := js.OrderedConsumer(ctx, events.StreamAgent, jetstream.OrderedConsumerConfig{})
	if err != nil {
		t.Fatal(err)
	}
	ids := map[string]bool{}
	for {
		msg, err := c.Next(jetstream.FetchMaxWait(300 * time.Millisecond))
		if err != nil {
			return ids
		}
		evs, err := events.Trail(msg.Headers(), msg.Subject(), msg.Data())
		if err != nil {
			t.Fatal(err)
		}
		for _, ev := range evs {
			if ev.Type() != except {
				ids[ev.ID()] = true
			}
		}
	}
}

// indexedIDs counts the agent_events documents of a session by event_id,
// reading the node directly.
func indexedIDs(node, index, session string) map[string]int {
	q := fmt.Sprintf(`{"size":1000,"query":{"term":{"session_id":%q}},"_source":["event_id"]}`, session)
	resp, err := http.Post("http://"+node+"/"+index+"/_search", "application/json", strings.NewReader(q))
	if err != nil {
		return nil
	}
	defer resp.Body.Close()
	var body struct {
		Hits struct {
			Hits []struct {
				Source struct {
					EventID string `json:"event_id"`
				} `json:"_source"`
			} `json:"hits"`
		} `json:"hits"`
	}
	if json.NewDecoder(resp.Body).Decode(&body) != nil {
		return nil
	}
	ids := map[string]int{}
	for _, h := range body.Hits.Hits {
		ids[h.Source.EventID]++
	}
	return ids
}

func deleteIndices(node, prefix string) {
	req, _ := http.NewRequest(http.MethodDelete, "http://"+node+"/"+prefix+"*", nil)
	if resp, err := http.DefaultClient.Do(req); err == nil {
		resp.Body.Close()
	}
}
