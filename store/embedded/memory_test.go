package embedded_test

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/agentbus/agentbus/store"
	"github.com/agentbus/agentbus/store/embedded"
)

// TestMemoryKeysOfEarlierVersionsMoveOnOpen: a memory stored under the
// one-token key an earlier version wrote is moved when the store opens,
// and found by its key and by a recall of its user.
func TestMemoryKeysOfEarlierVersionsMoveOnOpen(t *testing.T) {
	srv := startServer(t, t.TempDir())
	js := connect(t, srv)
	ctx := t.Context()
	kv, err := js.CreateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: embedded.BucketMemory, History: 1})
	if err != nil {
		t.Fatal(err)
	}
	// "t:@user:u1:fact", escaped whole as earlier versions did.
	doc := fmt.Sprintf(`{"id":"t:@user:u1:fact","tenant_id":"t","user_id":"u1","scope":"user","key":"t:@user:u1:fact",`+
		`"text":"home city","created_at":%q}`, time.Now().UTC().Format(time.RFC3339Nano))
	if _, err := kv.Put(ctx, "t_3A_40user_3Au1_3Afact", []byte(doc)); err != nil {
		t.Fatal(err)
	}
	s := newStore(t, js, embedded.Config{})
	m, err := s.GetMemory(ctx, "t:@user:u1:fact")
	if err != nil || m.Text != "home city" {
		t.Fatalf("GetMemory after the move: %+v, %v", m, err)
	}
	if _, err := kv.Get(ctx, "t_3A_40user_3Au1_3Afact"); err == nil {
		t.Fatal("the old key is still there")
	}
	newStore(t, js, embedded.Config{}) // a second open moves nothing twice
	m.Embedding = []float32{1, 0}
	if _, err := s.PutMemory(ctx, m); err != nil {
		t.Fatal(err)
	}
	hits, err := s.QueryMemory(ctx, store.MemoryQuery{TenantID: "t", Vector: []float32{1, 0},
		Within: []store.MemorySelector{{Scope: store.ScopeUser, UserID: "u1"}}})
	if err != nil || len(hits) != 1 || hits[0].Key != m.Key {
		t.Fatalf("recall of the moved memory: %v, %v", hits, err)
	}
}

// TestRecallPastOneBatch: a recall whose scope holds more memories than
// one batched read returns finds them all (by a watch of its filters).
func TestRecallPastOneBatch(t *testing.T) {
	srv := startServer(t, t.TempDir())
	s := newStore(t, connect(t, srv), embedded.Config{})
	ctx := t.Context()
	const n = 1100
	for i := range n {
		key := fmt.Sprintf("t:@user:u1:fact%04d", i)
		m := store.Memory{ID: key, Key: key, TenantID: "t", UserID: "u1", Scope: store.ScopeUser, Text: "x",
			Embedding: []float32{1, float32(i) / n}, CreatedAt: time.Now().UTC()}
		if _, err := s.PutMemory(ctx, m); err != nil {
			t.Fatal(err)
		}
	}
	hits, err := s.QueryMemory(ctx, store.MemoryQuery{TenantID: "t", Vector: []float32{0, 1}, TopK: 3,
		Within: []store.MemorySelector{{Scope: store.ScopeUser, UserID: "u1"}}})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"t:@user:u1:fact1099", "t:@user:u1:fact1098", "t:@user:u1:fact1097"}
	if got := []string{hits[0].Key, hits[1].Key, hits[2].Key}; !slices.Equal(got, want) {
		t.Fatalf("top 3 of %d: %v, want %v", n, got, want)
	}
}
