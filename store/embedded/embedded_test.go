package embedded_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	json "github.com/go-json-experiment/json/v1"
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

// TestAppendEventsStoresOneMessagePerSession: the events of one append
// are stored as one message per session (a lone event as its own), a
// large append is split, a re-append of the same events stores nothing,
// and Trace and Events read every event once, in append order.
func TestAppendEventsStoresOneMessagePerSession(t *testing.T) {
	js := connect(t, startServer(t, t.TempDir()))
	s := newStore(t, js, embedded.Config{})
	ctx := t.Context()
	ts := time.Now().UTC().Truncate(time.Millisecond)
	ev := func(id, session string, payload int) store.Event {
		p, _ := json.Marshal(map[string]string{"pad": strings.Repeat("x", payload)})
		return store.Event{EventID: id, TenantID: "acme", SessionID: session, PlanID: "plan-" + session, EventType: "step.done",
			Payload: p, TS: ts}
	}
	batch := []store.Event{ev("a1", "s1", 10), ev("b1", "s2", 10), ev("a2", "s1", 10), ev("a3", "s1", 10), ev("c1", "s3", 10)}
	stored := func() uint64 {
		st, err := js.Stream(ctx, embedded.StreamEvents)
		if err != nil {
			t.Fatal(err)
		}
		info, err := st.Info(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return info.State.Msgs
	}
	for range 2 {
		if err := s.AppendEvents(ctx, batch); err != nil {
			t.Fatal(err)
		}
		if n := stored(); n != 3 {
			t.Fatalf("%d messages stored, want one per session (3), once", n)
		}
	}
	got, err := s.Trace(ctx, store.TraceQuery{TenantID: "acme", SessionID: "s1"})
	if err != nil || len(got) != 3 || got[0].EventID != "a1" || got[1].EventID != "a2" || got[2].EventID != "a3" {
		t.Fatalf("trace of s1: %+v, %v", got, err)
	}
	all, err := s.Events(ctx, store.EventQuery{TenantID: "acme", Limit: 100})
	if err != nil || len(all) != 5 {
		t.Fatalf("events: %d, %v; want 5", len(all), err)
	}

	var big []store.Event
	for i := range 200 {
		big = append(big, ev(fmt.Sprintf("big-%03d", i), "s4", 2000)) // ~400 KB in all
	}
	if err := s.AppendEvents(ctx, big); err != nil {
		t.Fatal(err)
	}
	if n := stored(); n != 5 {
		t.Fatalf("%d messages stored, want the large append split in two", n)
	}
	got, err = s.Trace(ctx, store.TraceQuery{TenantID: "acme", SessionID: "s4"})
	if err != nil || len(got) != 200 || got[0].EventID != "big-000" || got[199].EventID != "big-199" {
		t.Fatalf("trace of s4: %d events, %v", len(got), err)
	}
}

// TestPlanSnapshotsFromTwoStores: a store writes a plan's next snapshot
// at the revision it last wrote without reading first; when another store
// wrote in between, the highest version still wins, a lower one is stale,
// and the same version with the same content is an idempotent success.
func TestPlanSnapshotsFromTwoStores(t *testing.T) {
	srv := startServer(t, t.TempDir())
	a := newStore(t, connect(t, srv), embedded.Config{})
	b := newStore(t, connect(t, srv), embedded.Config{})
	ctx := t.Context()
	plan := func(replans int) store.Plan {
		return store.Plan{PlanID: "p-two", TenantID: "t", SessionID: "s", UserID: "u", Status: store.PlanStatusExecuting,
			ReplanCount: replans, CreatedAt: time.Date(2026, 11, 26, 0, 0, 0, 0, time.UTC)}
	}
	for _, w := range []struct {
		st      *embedded.Store
		version int64
		stale   bool
	}{{a, 1, false}, {a, 2, false}, {b, 3, false}, {a, 4, false}, {a, 3, true}, {b, 2, true}, {b, 5, false}, {a, 6, false}} {
		err := w.st.PutPlan(ctx, plan(int(w.version)), w.version)
		if w.stale != errors.Is(err, store.ErrStale) || !w.stale && err != nil {
			t.Fatalf("version %d: %v, stale %v", w.version, err, w.stale)
		}
	}
	if err := a.PutPlan(ctx, plan(6), 6); err != nil {
		t.Fatalf("the stored version again, same content: %v", err)
	}
	got, v, err := b.GetPlan(ctx, "t", "p-two")
	if err != nil || v != 6 || got.ReplanCount != 6 {
		t.Fatalf("stored version %d replans %d (%v), want 6", v, got.ReplanCount, err)
	}
}
