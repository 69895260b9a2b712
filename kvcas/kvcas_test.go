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

// TestSettleDeletesAnEmptiedEntry: a change that empties the entry
// deletes it, by compare-and-set: a writer that changed it meanwhile makes
// the deletion a lost race, and the change runs again on what it wrote;
// an absent entry that stays empty is not written. The deleted key is
// created again from a known absent entry without reading it.
func TestSettleDeletesAnEmptiedEntry(t *testing.T) {
	kv := bucket(t)
	ctx := context.Background()
	empty := func(c *counter) bool { return c.N == 0 && len(c.Owners) == 0 }
	take := func(owner string) func(c *counter, _ uint64) (bool, error) {
		return func(c *counter, _ uint64) (bool, error) { c.N++; c.Owners = append(c.Owners, owner); return true, nil }
	}
	release := func(owner string) func(c *counter, _ uint64) (bool, error) {
		return func(c *counter, _ uint64) (bool, error) {
			for i, o := range c.Owners {
				if o == owner {
					c.N--
					c.Owners = append(c.Owners[:i:i], c.Owners[i+1:]...)
					return true, nil
				}
			}
			return false, nil
		}
	}
	if _, err := kvcas.Update(ctx, kv, "k", take("a")); err != nil {
		t.Fatal(err)
	}
	// b takes the entry between the release's read and its deletion.
	calls := 0
	got, err := kvcas.Settle(ctx, kv, "k", empty, func(c *counter, rev uint64) (bool, error) {
		if calls++; calls == 1 {
			if _, err := kvcas.Update(ctx, kv, "k", take("b")); err != nil {
				t.Fatal(err)
			}
		}
		return release("a")(c, rev)
	})
	if err != nil || calls != 2 || got.Value.N != 1 || got.Revision == 0 {
		t.Fatalf("release of a while b took it: %+v after %d calls, %v", got, calls, err)
	}
	if e, err := kv.Get(ctx, "k"); err != nil || e.Revision() != got.Revision {
		t.Fatalf("b's entry is not the one stored: %v, %v", e, err)
	}
	// b's release empties it: the entry is deleted.
	got, err = kvcas.Settle(ctx, kv, "k", empty, release("b"))
	if err != nil || got.Revision != 0 || !empty(&got.Value) {
		t.Fatalf("the last release: %+v, %v", got, err)
	}
	if _, err := kv.Get(ctx, "k"); !errors.Is(err, jetstream.ErrKeyNotFound) {
		t.Fatalf("the emptied entry is still there: %v", err)
	}
	// Nothing to release on an absent entry: nothing written.
	if got, err := kvcas.Settle(ctx, kv, "k", empty, release("c")); err != nil || got.Revision != 0 {
		t.Fatalf("a release of an absent entry: %+v, %v", got, err)
	}
	// A take that knows the entry absent creates it at once.
	calls = 0
	got, err = kvcas.UpdateFrom(ctx, kv, "k", &kvcas.Entry[counter]{}, func(c *counter, rev uint64) (bool, error) {
		calls++
		return take("d")(c, rev)
	})
	if err != nil || calls != 1 || got.Value.N != 1 || got.Value.Owners[0] != "d" {
		t.Fatalf("a take after the deletion: %+v after %d calls, %v", got, calls, err)
	}
}
