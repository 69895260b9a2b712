package events_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/agentbus/agentbus/events"
	"github.com/agentbus/agentbus/events/eventstest"
)

// TestBoundKV_AWatchWhoseStartGetsNoReplyFails: a watch or listing whose
// consumer-create request gets no reply (lost with a dying cluster node)
// fails within the bound, though its caller's context runs for minutes;
// once the requests are answered again,
// a watch starts, outlives its bound and delivers what is written later.
func TestBoundKV_AWatchWhoseStartGetsNoReplyFails(t *testing.T) {
	if testing.Short() {
		t.Skip("lets its 2 s start bound pass twice: make test runs it, -short does not")
	}
	s := eventstest.Server(t)
	nc, js := eventstest.Connect(t, s)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute) // a handler's deadline
	defer cancel()
	direct, err := js.CreateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: "watched"})
	if err != nil {
		t.Fatal(err)
	}
	// The client reaches the JetStream API through a relay that answers
	// every request but, while dropping, the ones that create consumers.
	var dropping = make(chan bool, 1)
	dropping <- true
	relay, err := nc.Subscribe("relay.>", func(m *nats.Msg) {
		drop := <-dropping
		dropping <- drop
		if drop && strings.HasPrefix(m.Subject, "relay.CONSUMER.CREATE.") {
			return
		}
		r, err := nc.RequestMsg(&nats.Msg{Subject: "$JS.API." + strings.TrimPrefix(m.Subject, "relay."), Header: m.Header, Data: m.Data}, 5*time.Second)
		if err == nil {
			_ = m.RespondMsg(&nats.Msg{Header: r.Header, Data: r.Data})
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	defer relay.Unsubscribe()
	rjs, err := jetstream.NewWithAPIPrefix(nc, "relay")
	if err != nil {
		t.Fatal(err)
	}
	raw, err := rjs.KeyValue(ctx, "watched")
	if err != nil {
		t.Fatal(err)
	}
	const bound = 2 * time.Second // a start through the relay takes far less, even under load
	kv := events.BoundKV(raw, bound)

	starts := map[string]func() error{
		"Watch":            func() error { _, err := kv.Watch(ctx, "a.>"); return err },
		"WatchAll":         func() error { _, err := kv.WatchAll(ctx); return err },
		"WatchFiltered":    func() error { _, err := kv.WatchFiltered(ctx, []string{"a.>"}); return err },
		"ListKeys":         func() error { _, err := kv.ListKeys(ctx); return err },
		"ListKeysFiltered": func() error { _, err := kv.ListKeysFiltered(ctx, "a.>"); return err },
	}
	var wg sync.WaitGroup
	for name, start := range starts {
		wg.Go(func() {
			began := time.Now()
			err := start()
			if !errors.Is(err, events.ErrWatchNotStarted) || !errors.Is(err, context.DeadlineExceeded) {
				t.Errorf("%s with its start unanswered: %v, want ErrWatchNotStarted and a deadline", name, err)
			}
			if took := time.Since(began); took > 5*bound {
				t.Errorf("%s failed after %s, bound %s", name, took, bound)
			}
		})
	}
	wg.Wait()
	if _, err := kv.Get(ctx, "a.x"); !errors.Is(err, jetstream.ErrKeyNotFound) {
		t.Fatalf("a single call through the relay: %v", err)
	}

	<-dropping
	dropping <- false
	w, err := kv.Watch(ctx, "a.>", jetstream.UpdatesOnly())
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(bound + 500*time.Millisecond) // past the bound, the watch goes on
	if _, err := direct.Put(ctx, "a.x", []byte("1")); err != nil {
		t.Fatal(err)
	}
	select {
	case e := <-w.Updates():
		if e == nil || e.Key() != "a.x" || string(e.Value()) != "1" {
			t.Fatalf("the watch delivered %v", e)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("a started watch delivered nothing after its start's bound")
	}
	if err := w.Stop(); err != nil {
		t.Fatal(err)
	}
}
