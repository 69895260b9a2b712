package kvcas_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/agentbus/agentbus/events/eventstest"
	"github.com/agentbus/agentbus/kvcas"
)

type counter struct {
	N      int      `json:"n"`
	Owners []string `json:"owners,omitempty"`
}

func bucket(t *testing.T) jetstream.KeyValue {
	t.Helper()
	_, js := eventstest.Connect(t, eventstest.Server(t))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	kv, err := js.CreateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: "cas"})
	if err != nil {
		t.Fatal(err)
	}
	return kv
}

func TestConcurrentUpdatesLoseNoIncrement(t *testing.T) {
	kv := bucket(t)
	ctx := context.Background()
	const writers, each = 8, 25
	var wg sync.WaitGroup
	errs := make(chan error, writers*each)
	for range writers {
		wg.Go(func() {
			for range each {
				_, err := kvcas.Update(ctx, kv, "k", func(c *counter, _ uint64) (bool, error) {
					c.N++
					return true, nil
				})
				errs <- err
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	got, err := kvcas.Get[counter](ctx, kv, "k")
	if err != nil {
		t.Fatal(err)
	}
	if got.Value.N != writers*each {
		t.Fatalf("n = %d after %d increments: an update was lost", got.Value.N, writers*each)
	}
}

func TestUpdateCreatesAbsentEntriesOnceAndCarriesTheRevision(t *testing.T) {
	kv := bucket(t)
	ctx := context.Background()
	var wg sync.WaitGroup
	var mu sync.Mutex
	created := 0
	for _, who := range []string{"a", "b", "c", "d"} {
		wg.Go(func() {
			_, err := kvcas.Update(ctx, kv, "once", func(c *counter, rev uint64) (bool, error) {
				if rev != 0 {
					return false, nil // someone created it: nothing to do
				}
				c.Owners = []string{who}
				return true, nil
			})
			if err != nil {
				t.Error(err)
				return
			}
			mu.Lock()
			created++
			mu.Unlock()
		})
	}
	wg.Wait()
	got, err := kvcas.Get[counter](ctx, kv, "once")
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Value.Owners) != 1 || created != 4 {
		t.Fatalf("owners = %v, calls = %d: exactly one creator must win", got.Value.Owners, created)
	}
	e, err := kv.Get(ctx, "once")
	if err != nil {
		t.Fatal(err)
	}
	if got.Revision != e.Revision() {
		t.Fatalf("revision carried %d, entry's %d", got.Revision, e.Revision())
	}
}

func TestUpdateWritesNothingWhenChangeSaysSo(t *testing.T) {
	kv := bucket(t)
	ctx := context.Background()
	first, err := kvcas.Update(ctx, kv, "k", func(c *counter, _ uint64) (bool, error) { c.N = 1; return true, nil })
	if err != nil {
		t.Fatal(err)
	}
	same, err := kvcas.Update(ctx, kv, "k", func(c *counter, _ uint64) (bool, error) { c.N = 99; return false, nil })
	if err != nil {
		t.Fatal(err)
	}
	if same.Revision != first.Revision {
		t.Fatalf("a change that wrote nothing moved the revision %d -> %d", first.Revision, same.Revision)
	}
	stop := errors.New("refused")
	if _, err := kvcas.Update(ctx, kv, "k", func(*counter, uint64) (bool, error) { return true, stop }); !errors.Is(err, stop) {
		t.Fatalf("change's error = %v, want it returned as it is", err)
	}
}

func TestUpdateFromAStaleEntryRetriesFromTheStoredOne(t *testing.T) {
	kv := bucket(t)
	ctx := context.Background()
	stale, err := kvcas.Update(ctx, kv, "k", func(c *counter, _ uint64) (bool, error) { c.N = 1; return true, nil })
	if err != nil {
		t.Fatal(err)
	}
	if _, err := kvcas.Update(ctx, kv, "k", func(c *counter, _ uint64) (bool, error) { c.N = 10; return true, nil }); err != nil {
		t.Fatal(err)
	}
	calls := 0
	got, err := kvcas.UpdateFrom(ctx, kv, "k", &stale, func(c *counter, _ uint64) (bool, error) {
		calls++
		c.N++
		return true, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if got.Value.N != 11 || calls != 2 {
		t.Fatalf("n = %d after %d calls: the stale start must lose once, then add to the stored 10", got.Value.N, calls)
	}
}

func TestACorruptEntryFailsWithoutRetrying(t *testing.T) {
	kv := bucket(t)
	ctx := context.Background()
	if _, err := kv.Put(ctx, "k", []byte("not json")); err != nil {
		t.Fatal(err)
	}
	calls := 0
	_, err := kvcas.Update(ctx, kv, "k", func(*counter, uint64) (bool, error) { calls++; return true, nil })
	if !errors.Is(err, kvcas.ErrCorrupt) || calls != 0 {
		t.Fatalf("err = %v after %d calls, want ErrCorrupt before any change", err, calls)
	}
}

func TestIsConflictNamesOnlyLostRaces(t *testing.T) {
	kv := bucket(t)
	ctx := context.Background()
	rev, err := kv.Create(ctx, "k", []byte(`{}`))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := kv.Put(ctx, "k", []byte(`{"n":1}`)); err != nil {
		t.Fatal(err)
	}
	_, lostUpdate := kv.Update(ctx, "k", []byte(`{}`), rev)
	_, lostCreate := kv.Create(ctx, "k", []byte(`{}`))
	// A replicated bucket reports a lost update as the stream's wrong
	// last sequence, which nats.go does not map to ErrKeyRevisionMismatch.
	replicated := &jetstream.APIError{Code: 400, ErrorCode: jetstream.JSErrCodeStreamWrongLastSequence}
	if !kvcas.IsConflict(lostUpdate) || !kvcas.IsConflict(lostCreate) || !kvcas.IsConflict(replicated) {
		t.Fatalf("lost update %v, lost create %v: both are conflicts", lostUpdate, lostCreate)
	}
	other := &jetstream.APIError{Code: 503, ErrorCode: jetstream.JSErrCodeJetStreamNotEnabled}
	if kvcas.IsConflict(nil) || kvcas.IsConflict(context.DeadlineExceeded) || kvcas.IsConflict(jetstream.ErrKeyNotFound) || kvcas.IsConflict(other) {
		t.Fatal("only a lost race is a conflict")
	}
}
