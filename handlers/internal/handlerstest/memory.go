package handlerstest

import (
	"context"
	"errors"
	"sync"
	"testing"

	json "github.com/go-json-experiment/json/v1"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/agentbus/agentbus/handlers/internal/kvs"
	"github.com/agentbus/agentbus/handlers/memory"
	"github.com/agentbus/agentbus/llm"
	"github.com/agentbus/agentbus/store"
)

// ActAnswer is a model answer whose content is v as JSON.
func ActAnswer(t *testing.T, v map[string]any) llm.Response {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return TextResp(string(b))
}

// LockTaken reports whether the memory lock of key was ever taken: the
// locks bucket keeps the delete marker of a released lock.
func LockTaken(t *testing.T, env *Env, key string) bool {
	t.Helper()
	_, err := env.Locks.History(Ctx(t), kvs.Key(key))
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return false
	}
	if err != nil {
		t.Fatalf("locks history: %v", err)
	}
	return true
}

// LockOwner is the task holding the lock of key, or "".
func LockOwner(t *testing.T, env *Env, key string) string {
	t.Helper()
	e, err := env.Locks.Get(Ctx(t), kvs.Key(key))
	if err != nil {
		return ""
	}
	return string(e.Value())
}

// AssertNoMemory fails t if a memory is stored under key.
func AssertNoMemory(t *testing.T, env *Env, key string) {
	t.Helper()
	if _, err := env.Store.GetMemory(Ctx(t), key); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("GetMemory(%q) err = %v, want nothing written (ErrNotFound)", key, err)
	}
}

// MemScope is the scope of a shared memory of task in the test session.
func MemScope(task string) memory.MemoryScope {
	return memory.MemoryScope{TenantID: Tenant, SessionID: Session, TaskID: task, UserID: User, PlanID: "plan-m", StepIndex: 1, Shared: true}
}

// OutletIDsData is a value of OutletIDsShape.
const OutletIDsData = `{"outlet_ids":["out-001","out-002"]}`

// HeldStore is a memory store whose writes wait until Release: a test
// sees what a caller does while its write is in flight.
type HeldStore struct {
	memory.MemoryStore
	release chan struct{}
	once    sync.Once
}

// NewHeldStore holds the writes to st.
func NewHeldStore(st memory.MemoryStore) *HeldStore {
	return &HeldStore{MemoryStore: st, release: make(chan struct{})}
}

// PutMemory writes m once the store is released.
func (h *HeldStore) PutMemory(ctx context.Context, m store.Memory) (store.Memory, error) {
	select {
	case <-h.release:
	case <-ctx.Done():
		return store.Memory{}, ctx.Err()
	}
	return h.MemoryStore.PutMemory(ctx, m)
}

// Release lets the writes held and every later one through.
func (h *HeldStore) Release() { h.once.Do(func() { close(h.release) }) }
