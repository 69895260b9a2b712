package ingress_test

import (
	"bytes"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	json "github.com/go-json-experiment/json/v1"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"

	"github.com/agentbus/agentbus/events"
	"github.com/agentbus/agentbus/events/eventstest"
	"github.com/agentbus/agentbus/handlers/ingress"
	"github.com/agentbus/agentbus/handlers/internal/handlerstest"
	"github.com/agentbus/agentbus/orch"
	"github.com/agentbus/agentbus/runclient"
)

// gateDialer dials NATS until it is cut: then it closes its connections
// and refuses new ones until healed, as a network partition would.
type gateDialer struct {
	mu    sync.Mutex
	cut   bool
	conns []net.Conn
}

func (d *gateDialer) Dial(network, address string) (net.Conn, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.cut {
		return nil, errors.New("partitioned")
	}
	c, err := net.Dial(network, address)
	if err == nil {
		d.conns = append(d.conns, c)
	}
	return c, err
}

func (d *gateDialer) partition() {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.cut = true
	for _, c := range d.conns {
		_ = c.Close()
	}
	d.conns = nil
}

func (d *gateDialer) heal() {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.cut = false
}

// logSignal is a log writer that closes seen once a line holding want is
// written.
type logSignal struct {
	want string
	once sync.Once
	seen chan struct{}
}

func (l *logSignal) Write(p []byte) (int, error) {
	if bytes.Contains(p, []byte(l.want)) {
		l.once.Do(func() { close(l.seen) })
	}
	return len(p), nil
}

// TestIngressAnswersRunFinishedWhileDisconnected: a run.finished stored
// while the ingress's NATS connection is down (a NATS restart, a network
// blip) still answers the waiting POST once the ingress reconnects. Found
// by `make chaos`: the ingress used a core subscription, missed the
// result and held the caller until run_timeout.
func TestIngressAnswersRunFinishedWhileDisconnected(t *testing.T) {
	s, nc, js := eventstest.Bootstrap(t, handlerstest.Topology())
	gate := &gateDialer{}
	inc, err := nats.Connect(s.ClientURL(), nats.SetCustomDialer(gate), nats.MaxReconnects(-1),
		nats.ReconnectWait(50*time.Millisecond), nats.ReconnectJitter(0, 0))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(inc.Close)
	ijs, err := jetstream.New(inc)
	if err != nil {
		t.Fatal(err)
	}
	// The ingress logs "run requested" once its request is stored: it
	// has its PubAck.
	requested := &logSignal{want: `"message":"run requested"`, seen: make(chan struct{})}
	g := ingress.NewIngress(ijs, nil, zerolog.New(requested), ingress.IngressConfig{RunTimeout: 10 * time.Second})
	if err := g.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(g.Stop)
	srv := httptest.NewServer(g.Handler())
	t.Cleanup(srv.Close)

	// The "router": on run.requested, cut the ingress off, store the
	// run.finished while it is away, then let it reconnect.
	sub, err := nc.Subscribe("agent.run.requested.*", func(m *nats.Msg) {
		ev, err := events.FromMsg(m.Header, m.Data)
		if err != nil {
			t.Error(err)
			return
		}
		var req orch.RunRequest
		if err := events.Decode(ev, &req); err != nil {
			t.Error(err)
			return
		}
		go func() {
			select {
			case <-requested.seen:
			case <-time.After(10 * time.Second):
				t.Error("the ingress never had its request stored")
				return
			}
			gate.partition()
			for inc.IsConnected() {
				time.Sleep(5 * time.Millisecond)
			}
			fin, err := events.Child(ev, "run.finished", events.TypeRunFinished, orch.RunResult{
				RunID: req.RunID, TenantID: req.TenantID, SessionID: req.SessionID, Status: orch.PlanComplete,
				TerminalCode: orch.CodeSuccess, Response: "done while you were away"})
			if err == nil {
				err = events.Publish(handlerstest.Ctx(t), js, fin)
			}
			if err != nil { // stored: the ingress can only read it after it reconnects
				t.Error(err)
			}
			gate.heal()
		}()
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sub.Unsubscribe() })
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}

	body, _ := json.Marshal(runclient.Request{TenantID: handlerstest.Tenant, UserID: handlerstest.User, SessionID: handlerstest.Session, Message: handlerstest.RankTask})
	resp, err := http.Post(srv.URL+"/agent/run", "application/json", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var res runclient.Response
	if err := json.NewDecoder(resp.Body).Decode(&res); err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK || res.Response != "done while you were away" {
		t.Fatalf("POST /agent/run = %s %+v; want the run.finished stored while the ingress was disconnected", resp.Status, res)
	}
}
