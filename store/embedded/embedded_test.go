package embedded_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/agentbus/agentbus/store"
	"github.com/agentbus/agentbus/store/embedded"
	"github.com/agentbus/agentbus/store/storetest"
)

// startServer runs an in-process JetStream server storing in dir.
func startServer(t *testing.T, dir string) *server.Server {
	t.Helper()
	srv, err := server.NewServer(&server.Options{
		Host:      "127.0.0.1",
		Port:      -1,
		JetStream: true,
		StoreDir:  dir,
		NoLog:     true,
		NoSigs:    true,
	})
	if err != nil {
		t.Fatalf("nats-server: %v", err)
	}
	srv.Start()
	if !srv.ReadyForConnections(10 * time.Second) {
		srv.Shutdown()
		t.Fatalf("nats-server not ready")
	}
	t.Cleanup(func() {
		srv.Shutdown()
		srv.WaitForShutdown()
	})
	return srv
}

// connect returns a JetStream context on srv, closed at test end.
func connect(t *testing.T, srv *server.Server) jetstream.JetStream {
	t.Helper()
	nc, err := nats.Connect(srv.ClientURL())
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatalf("jetstream: %v", err)
	}
	return js
}

func newStore(t *testing.T, js jetstream.JetStream, cfg embedded.Config) *embedded.Store {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	s, err := embedded.New(ctx, js, cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return s
}

func TestContract(t *testing.T) {
	storetest.Run(t, func(t *testing.T) storetest.Backend {
		srv := startServer(t, t.TempDir())
		return newStore(t, connect(t, srv), embedded.Config{})
	})
}

func TestRestartKeepsData(t *testing.T) {
	dir := t.TempDir()
	var first *server.Server
	var firstConn *nats.Conn
	open := func(t *testing.T) storetest.Backend {
		first = startServer(t, dir)
		js := connect(t, first)
		firstConn = js.Conn()
		return newStore(t, js, embedded.Config{})
	}
	reopen := func(t *testing.T) storetest.Backend {
		firstConn.Close()
		first.Shutdown()
		first.WaitForShutdown()
		srv := startServer(t, dir)
		return newStore(t, connect(t, srv), embedded.Config{})
	}
	storetest.RunRestart(t, open, reopen)
}

func TestSharedBetweenConnections(t *testing.T) {
	srv := startServer(t, t.TempDir())
	a := newStore(t, connect(t, srv), embedded.Config{})
	b := newStore(t, connect(t, srv), embedded.Config{}) // idempotent New
	ctx := t.Context()
	m := store.Memory{ID: "1", TenantID: "t", Key: "t:s:task:label", Text: "{}", CreatedAt: time.Now().UTC()}
	put, err := a.PutMemory(ctx, m)
	if err != nil {
		t.Fatalf("PutMemory: %v", err)
	}
	got, err := b.GetMemory(ctx, m.Key)
	if err != nil {
		t.Fatalf("GetMemory via second connection: %v", err)
	}
	if got.Version != put.Version {
		t.Fatalf("version %+v, want %+v", got.Version, put.Version)
	}
}

func TestPrefixIsolates(t *testing.T) {
	srv := startServer(t, t.TempDir())
	js := connect(t, srv)
	a := newStore(t, js, embedded.Config{Prefix: "a"})
	b := newStore(t, js, embedded.Config{Prefix: "b"})
	ctx := t.Context()
	p := store.Plan{PlanID: "p1", TenantID: "t", SessionID: "s", Status: store.PlanStatusPending}
	if err := a.PutPlan(ctx, p, 1); err != nil {
		t.Fatalf("PutPlan: %v", err)
	}
	if _, _, err := b.GetPlan(ctx, "t", "p1"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("prefix b sees prefix a's plan: %v", err)
	}
	ev := store.Event{EventID: "e1", TenantID: "t", SessionID: "s", EventType: "x", TS: time.Now().UTC()}
	if err := a.AppendEvents(ctx, []store.Event{ev}); err != nil {
		t.Fatalf("AppendEvents: %v", err)
	}
	tr, err := b.Trace(ctx, store.TraceQuery{TenantID: "t", SessionID: "s"})
	if err != nil || len(tr) != 0 {
		t.Fatalf("prefix b trace = %v, %v; want empty", tr, err)
	}
	if _, err := js.KeyValue(ctx, "a_store_plans"); err != nil {
		t.Fatalf("bucket a_store_plans: %v", err)
	}
}

func TestNewRejectsBadConfig(t *testing.T) {
	srv := startServer(t, t.TempDir())
	js := connect(t, srv)
	if _, err := embedded.New(t.Context(), js, embedded.Config{Prefix: "bad.prefix"}); !errors.Is(err, store.ErrInvalidArgument) {
		t.Fatalf("bad prefix: %v", err)
	}
	if _, err := embedded.New(t.Context(), nil, embedded.Config{}); !errors.Is(err, store.ErrInvalidArgument) {
		t.Fatalf("nil js: %v", err)
	}
}
