package pipeline

import (
	"testing"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/agentbus/agentbus/events"
	"github.com/agentbus/agentbus/handlers/internal/handlerstest"
	"github.com/agentbus/agentbus/orch"
)

// TestMemoryLocksOnlyWhereWritersCanMeet: in a whole sequential run each
// step is dispatched alone and is its key's only writer (its task id is
// the run's and the step's), so no step output takes a lock and the
// locks bucket is never written; a member of a group of several locks its
// key until the router has its result (TestCoreFlow_ExecutorValidatesBeforeWriteMemory,
// TestMemory_ConcurrentSessionsDoNotCollide).
func TestMemoryLocksOnlyWhereWritersCanMeet(t *testing.T) {
	wholeRun(t)
	env := handlerstest.NewEnv(t)
	before, err := env.Locks.Status(handlerstest.Ctx(t))
	if err != nil {
		t.Fatal(err)
	}
	f := newFlow(t, env, env.Store)
	res, _ := f.drive(t, handlerstest.NewEvent(t, "run-locks", events.TypeRunRequested, handlerstest.RunRequest("run-locks", handlerstest.RankTask)))
	if res.TerminalCode != orch.CodeSuccess || len(res.Steps) == 0 {
		t.Fatalf("run ended %s with %d steps", res.TerminalCode, len(res.Steps))
	}
	for _, s := range res.Steps {
		if handlerstest.LockTaken(t, env, s.MemoryKey) {
			t.Errorf("step %d's output %s took a lock, alone in its group", s.Index, s.MemoryKey)
		}
	}
	after, err := env.Locks.Status(handlerstest.Ctx(t))
	if err != nil {
		t.Fatal(err)
	}
	if b, a := before.(*jetstream.KeyValueBucketStatus).StreamInfo().State.LastSeq, after.(*jetstream.KeyValueBucketStatus).StreamInfo().State.LastSeq; a != b {
		t.Errorf("the locks bucket was written %d times by a sequential run", a-b)
	}
}
