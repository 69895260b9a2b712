package events_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/agentbus/agentbus/events"
	"github.com/agentbus/agentbus/events/eventstest"
)

// TestLastEntries reads the current values of a bucket's keys with one
// batched direct get: the live keys with their revisions, never a deleted
// or purged one or a key never written, every key a wildcard filter
// matches, and the server's refusal of a batch over its limit as an error.
func TestLastEntries(t *testing.T) {
	_, js := eventstest.Connect(t, eventstest.Server(t))
	kv, err := js.CreateKeyValue(testCtx(t), jetstream.KeyValueConfig{Bucket: "batch", History: 2})
	if err != nil {
		t.Fatal(err)
	}
	put := func(key, value string) uint64 {
		t.Helper()
		rev, err := kv.PutString(testCtx(t), key, value)
		if err != nil {
			t.Fatal(err)
		}
		return rev
	}
	put("t1.a", "old")
	revA := put("t1.a", "a")
	put("t1.b", "b")
	revC := put("t2.c", "c")
	put("t1.d", "d")
	if err := kv.Delete(testCtx(t), "t1.b"); err != nil {
		t.Fatal(err)
	}
	if err := kv.Purge(testCtx(t), "t1.d"); err != nil {
		t.Fatal(err)
	}

	got, err := events.LastEntries(testCtx(t), js, "batch", []string{"t1.a", "t1.b", "t2.c", "t1.d", "t9.none"})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]events.KVValue{"t1.a": {Value: []byte("a"), Revision: revA}, "t2.c": {Value: []byte("c"), Revision: revC}}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("LastEntries = %v, want %v", got, want)
	}

	values, err := events.LastValues(testCtx(t), js, "batch", []string{"t1.>"})
	if err != nil {
		t.Fatal(err)
	}
	if len(values) != 1 || string(values["t1.a"]) != "a" {
		t.Errorf("LastValues(t1.>) = %v, want t1.a only", values)
	}

	none, err := events.LastEntries(testCtx(t), js, "batch", []string{"t9.>"})
	if err != nil || len(none) != 0 {
		t.Errorf("LastEntries of keys never written = %v, %v; want none, no error", none, err)
	}

	for i := range 1025 {
		put(fmt.Sprintf("many.k%d", i), "v")
	}
	if _, err := events.LastEntries(testCtx(t), js, "batch", []string{"many.>"}); err == nil || !strings.Contains(err.Error(), "413") {
		t.Errorf("a filter matching 1,025 keys: err = %v, want the server's 413", err)
	}
	all, err := events.LastEntries(testCtx(t), js, "batch", []string{"many.k1", "many.k1024"})
	if err != nil || len(all) != 2 {
		t.Errorf("two keys among many: %v, %v", all, err)
	}

	// Nothing answers for a bucket that does not exist: the read ends
	// with its context.
	ctx, cancel := context.WithTimeout(testCtx(t), 200*time.Millisecond)
	defer cancel()
	if _, err := events.LastEntries(ctx, js, "absent", []string{"k"}); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("a bucket that does not exist: err = %v, want the context's deadline", err)
	}
}
