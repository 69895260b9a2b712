package embedded_test

import (
	"errors"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/agentbus/agentbus/store"
	"github.com/agentbus/agentbus/store/embedded"
)

// TestExecutionRecordsExpire: with a short ExecutionTTL the bucket itself
// removes a record once it is older than the TTL: it is neither read nor
// listed, and its key is gone from the bucket's stream, while a record
// written later is still there.
func TestExecutionRecordsExpire(t *testing.T) {
	if testing.Short() {
		t.Skip("waits for a record to outlive its 2 s TTL: make test runs it, -short does not")
	}
	srv := startServer(t, t.TempDir())
	js := connect(t, srv)
	s := newStore(t, js, embedded.Config{ExecutionTTL: 2 * time.Second})
	ctx := t.Context()
	if s.ExecutionTTL() != 2*time.Second {
		t.Fatalf("ExecutionTTL = %v", s.ExecutionTTL())
	}
	rec := func(id string) store.Execution {
		return store.Execution{ExecutionID: id, TenantID: "t1", AgentID: "agent-a", Status: store.ExecutionSuccess,
			TerminalCode: "SUCCESS", CreatedAt: time.Now().UTC()}
	}
	if err := s.PutExecution(ctx, rec("run-1")); err != nil {
		t.Fatal(err)
	}
	if _, err := s.GetExecution(ctx, "t1", "run-1"); err != nil {
		t.Fatalf("fresh record: %v", err)
	}
	time.Sleep(1500 * time.Millisecond)
	if err := s.PutExecution(ctx, rec("run-2")); err != nil {
		t.Fatal(err)
	}
	// Gone from the bucket, not only hidden: the raw KV has no value.
	kv, err := js.KeyValue(ctx, embedded.BucketExecutions)
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		_, err := kv.Get(ctx, "t1.run-1")
		if errors.Is(err, jetstream.ErrKeyNotFound) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("record past its TTL still in the bucket: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if _, err := s.GetExecution(ctx, "t1", "run-1"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("expired record read: %v", err)
	}
	st, err := kv.Status(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if st.TTL() != 2*time.Second {
		t.Fatalf("bucket TTL %v, want 2s", st.TTL())
	}
	got, err := s.ListExecutions(ctx, store.ExecutionQuery{TenantID: "t1"})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[0].ExecutionID != "run-2" {
		t.Fatalf("listed %+v, want run-2 only", got)
	}
}
