package memory_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	json "github.com/go-json-experiment/json/v1"

	"github.com/agentbus/agentbus/handlers/internal/handlerstest"
	"github.com/agentbus/agentbus/handlers/memory"
	"github.com/agentbus/agentbus/store"
)

func TestMemoryScopeKey(t *testing.T) {
	if got, want := handlerstest.MemScope("task-1").Key("outlet_ids"), handlerstest.Tenant+":"+handlerstest.Session+":task-1:outlet_ids"; got != want {
		t.Errorf("Key = %q, want %q", got, want)
	}
}

func TestMemoryWriterLabels(t *testing.T) {
	env := handlerstest.NewEnv(t)
	w := &memory.MemoryWriter{Store: env.Store, Locks: env.Locks}
	cases := []struct {
		label string
		ok    bool
	}{
		{"outlet_ids", true},
		{"a", true},
		{"0results", true},
		{strings.Repeat("a", 64), true},
		{"../x", false},
		{"a:b", false},
		{"A", false},
		{"", false},
		{"_x", false},
		{"a b", false},
		{"a/b", false},
		{"a.b", false},
		{"é", false},
		{strings.Repeat("a", 65), false},
	}
	for _, tc := range cases {
		t.Run(tc.label, func(t *testing.T) {
			scope := handlerstest.MemScope("task-label")
			key, _, err := w.Write(handlerstest.Ctx(t), scope, tc.label, json.RawMessage(handlerstest.OutletIDsData), json.RawMessage(handlerstest.OutletIDsShape))
			if tc.ok {
				if err != nil {
					t.Fatalf("Write(%q): %v", tc.label, err)
				}
				if key != scope.Key(tc.label) {
					t.Errorf("key = %q, want %q", key, scope.Key(tc.label))
				}
				m, err := env.Store.GetMemory(handlerstest.Ctx(t), key)
				if err != nil || m.Text != handlerstest.OutletIDsData || m.Source != "executor" || m.TaskID != "task-label" {
					t.Errorf("stored %+v (%v)", m, err)
				}
				return
			}
			if !errors.Is(err, memory.ErrBadLabel) {
				t.Fatalf("Write(%q) err = %v, want ErrBadLabel", tc.label, err)
			}
			if key != "" {
				t.Errorf("key = %q on error", key)
			}
			if tc.label != "" {
				if _, err := env.Store.GetMemory(handlerstest.Ctx(t), scope.Key(tc.label)); !errors.Is(err, store.ErrNotFound) {
					t.Errorf("GetMemory err = %v, want nothing written", err)
				}
			}
		})
	}
}

func TestMemoryWriterContract(t *testing.T) {
	env := handlerstest.NewEnv(t)
	w := &memory.MemoryWriter{Store: env.Store, Locks: env.Locks}
	cases := []struct {
		name       string
		data       string
		wantActual string
	}{
		{"wrong field type", `{"outlet_ids":"out-001"}`, `{"outlet_ids":"string"}`},
		{"missing required field", `{"outlets":[1]}`, `{"outlets":"array"}`},
		{"not an object", `["out-001"]`, `"array"`},
		{"not JSON", `{`, `"not JSON"`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			scope := handlerstest.MemScope("task-contract")
			_, _, err := w.Write(handlerstest.Ctx(t), scope, "outlet_ids", json.RawMessage(tc.data), json.RawMessage(handlerstest.OutletIDsShape))
			var cv *memory.ContractViolation
			if !errors.As(err, &cv) {
				t.Fatalf("err = %v, want *ContractViolation", err)
			}
			if string(cv.Expected) != handlerstest.OutletIDsShape || cv.Reason == "" {
				t.Errorf("violation = %+v", cv)
			}
			handlerstest.AssertJSON(t, cv.Actual, tc.wantActual)
			if _, err := env.Store.GetMemory(handlerstest.Ctx(t), scope.Key("outlet_ids")); !errors.Is(err, store.ErrNotFound) {
				t.Errorf("GetMemory err = %v, want nothing written", err)
			}
		})
	}
}

func TestMemoryWriterWithoutLocks(t *testing.T) {
	env := handlerstest.NewEnv(t)
	fixed := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	w := &memory.MemoryWriter{Store: env.Store, Now: func() time.Time { return fixed }}
	key, waited, err := w.Write(handlerstest.Ctx(t), handlerstest.MemScope("task-nl"), "outlet_ids", json.RawMessage(handlerstest.OutletIDsData), json.RawMessage(handlerstest.OutletIDsShape))
	if err != nil || waited != 0 {
		t.Fatalf("Write = %v, waited %s", err, waited)
	}
	m, err := env.Store.GetMemory(handlerstest.Ctx(t), key)
	if err != nil || !m.CreatedAt.Equal(fixed) || m.PlanID != "plan-m" || m.StepIndex != 1 || m.UserID != handlerstest.User {
		t.Errorf("stored %+v (%v)", m, err)
	}
}

// TestMemoryWriterDrawnWhileLocking: WriteDrawn draws the write while it
// takes the key's lock. A refused draw writes nothing, returns the draw's
// error, also over an invalid label, and releases the lock it took, while
// a lock its owner already held stays held; a failed embedding releases
// it too; a draw that succeeds writes under the lock.
func TestMemoryWriterDrawnWhileLocking(t *testing.T) {
	env := handlerstest.NewEnv(t)
	ctx := handlerstest.Ctx(t)
	w := &memory.MemoryWriter{Store: env.Store, Locks: env.Locks, LockWait: 100 * time.Millisecond}
	refused := errors.New("budget refused")
	refuse := func(context.Context) error { return refused }
	data, shape := json.RawMessage(handlerstest.OutletIDsData), json.RawMessage(handlerstest.OutletIDsShape)

	scope := handlerstest.MemScope("task-refused")
	key := scope.Key("outlet_ids")
	if _, _, err := w.WriteDrawn(ctx, scope, "outlet_ids", data, shape, refuse); !errors.Is(err, refused) {
		t.Fatalf("refused draw: err = %v, want the draw's", err)
	}
	handlerstest.AssertNoMemory(t, env, key)
	if !handlerstest.LockTaken(t, env, key) {
		t.Fatalf("the lock of %s was never taken while the write was drawn", key)
	}
	if owner := handlerstest.LockOwner(t, env, key); owner != "" {
		t.Fatalf("a refused draw left the lock of %s held by %q", key, owner)
	}
	// Another task takes the key at once.
	other := scope
	other.TaskID = "task-other"
	if waited, _, err := w.Lock(ctx, key, other.TaskID); err != nil || waited >= w.LockWait {
		t.Fatalf("another task's lock after the refusal: %v (waited %s)", err, waited)
	}

	if _, _, err := w.WriteDrawn(ctx, handlerstest.MemScope("task-bad-label"), "../x", data, shape, refuse); !errors.Is(err, refused) {
		t.Fatalf("refused draw of an invalid label: err = %v, want the draw's", err)
	}

	held := handlerstest.MemScope("task-held")
	key = held.Key("outlet_ids")
	if _, took, err := w.Lock(ctx, key, held.TaskID); err != nil || !took {
		t.Fatalf("lock: %v (took %v)", err, took)
	}
	if _, _, err := w.WriteDrawn(ctx, held, "outlet_ids", data, shape, refuse); !errors.Is(err, refused) {
		t.Fatalf("refused draw over a held lock: err = %v", err)
	}
	if owner := handlerstest.LockOwner(t, env, key); owner != held.TaskID {
		t.Fatalf("the lock its owner held before is held by %q, want %q", owner, held.TaskID)
	}

	// A failed embedding writes nothing and leaves no lock it took.
	failing := &memory.MemoryWriter{Store: env.Store, Locks: env.Locks, Embedder: failingEmbedder{}}
	unembedded := handlerstest.MemScope("task-unembedded")
	if _, _, err := failing.WriteDrawn(ctx, unembedded, "outlet_ids", data, shape, func(context.Context) error { return nil }); err == nil {
		t.Fatal("a failed embedding wrote")
	}
	handlerstest.AssertNoMemory(t, env, unembedded.Key("outlet_ids"))
	if owner := handlerstest.LockOwner(t, env, unembedded.Key("outlet_ids")); owner != "" {
		t.Fatalf("a failed embedding left the lock held by %q", owner)
	}

	drawn := 0
	ok := handlerstest.MemScope("task-drawn")
	got, _, err := w.WriteDrawn(ctx, ok, "outlet_ids", data, shape, func(context.Context) error { drawn++; return nil })
	if err != nil || got != ok.Key("outlet_ids") || drawn != 1 {
		t.Fatalf("WriteDrawn = %q, %v (drawn %d)", got, err, drawn)
	}
	if m, err := env.Store.GetMemory(ctx, got); err != nil || m.Text != handlerstest.OutletIDsData {
		t.Fatalf("stored %+v (%v)", m, err)
	}
	if owner := handlerstest.LockOwner(t, env, got); owner != ok.TaskID {
		t.Fatalf("the written key's lock is held by %q, want %q", owner, ok.TaskID)
	}
}

// failingEmbedder fails every embedding.
type failingEmbedder struct{}

func (failingEmbedder) Embed(context.Context, []string) ([][]float32, error) {
	return nil, errors.New("embedder unavailable")
}

func (failingEmbedder) Dimension() int { return 8 }

// TestStartDrawnReturnsBeforeItsWrite: StartDrawn checks and draws before
// it returns, starts the write of a key no other task writes without
// awaiting it, and its wait returns once the value is stored. A value off
// its contract starts nothing; a shared key is written before it returns.
func TestStartDrawnReturnsBeforeItsWrite(t *testing.T) {
	env := handlerstest.NewEnv(t)
	ctx := handlerstest.Ctx(t)
	held := handlerstest.NewHeldStore(env.Store)
	w := &memory.MemoryWriter{Store: held, Locks: env.Locks}
	data, shape := json.RawMessage(handlerstest.OutletIDsData), json.RawMessage(handlerstest.OutletIDsShape)
	scope := handlerstest.MemScope("task-alone")
	scope.Shared = false
	drawn := 0
	draw := func(context.Context) error { drawn++; return nil }

	key, wait, err := w.StartDrawn(ctx, scope, "outlet_ids", data, shape, draw)
	if err != nil || key != scope.Key("outlet_ids") || drawn != 1 {
		t.Fatalf("StartDrawn = %q, %v (drawn %d)", key, err, drawn)
	}
	handlerstest.AssertNoMemory(t, env, key) // the write is held
	if handlerstest.LockTaken(t, env, key) {
		t.Errorf("a key no other task writes was locked")
	}
	held.Release()
	if err := wait(ctx); err != nil {
		t.Fatal(err)
	}
	if m, err := env.Store.GetMemory(ctx, key); err != nil || m.Text != handlerstest.OutletIDsData || m.Source != "executor" {
		t.Fatalf("after the wait: %+v, %v", m, err)
	}

	bad := handlerstest.MemScope("task-bad")
	bad.Shared = false
	var cv *memory.ContractViolation
	if _, wait, err := w.StartDrawn(ctx, bad, "outlet_ids", json.RawMessage(`{"outlet_ids":"x"}`), shape, draw); !errors.As(err, &cv) || wait != nil {
		t.Fatalf("off its contract: %v, wait %v", err, wait != nil)
	}
	handlerstest.AssertNoMemory(t, env, bad.Key("outlet_ids"))

	shared := handlerstest.MemScope("task-shared")
	key, wait, err = w.StartDrawn(ctx, shared, "outlet_ids", data, shape, draw)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := env.Store.GetMemory(ctx, key); err != nil {
		t.Fatalf("a shared key is not written when StartDrawn returns: %v", err)
	}
	if !handlerstest.LockTaken(t, env, key) || wait(ctx) != nil {
		t.Errorf("a shared key's write took no lock, or its wait failed")
	}
}
