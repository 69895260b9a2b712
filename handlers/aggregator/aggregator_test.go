package aggregator_test

import (
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/cloudevents/sdk-go/v2/event"
	json "github.com/go-json-experiment/json/v1"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/agentbus/agentbus/events"
	"github.com/agentbus/agentbus/handlers"
	"github.com/agentbus/agentbus/handlers/aggregator"
	"github.com/agentbus/agentbus/handlers/internal/handlerstest"
	"github.com/agentbus/agentbus/kvcas"
	"github.com/agentbus/agentbus/orch"
)

func stepFinishedEvent(t *testing.T, id string, group orch.Group, step int) event.Event {
	t.Helper()
	return handlerstest.NewEvent(t, id, events.TypeStepFinished, orch.StepFinished{
		Run:   handlerstest.PlanRun("run-agg", handlerstest.RankTask),
		Group: group,
		Result: orch.StepResult{Step: step, TaskID: fmt.Sprintf("task-%d", step), Outcome: orch.OutcomeComplete,
			MemoryKey: fmt.Sprintf("%s:%s:task-%d:out", handlerstest.Tenant, handlerstest.Session, step), Validated: true},
	})
}

// faninEntry returns how many members a group's fanin entry counts and
// the entry's revision.
func faninEntry(t *testing.T, env *handlerstest.Env, groupID string) (int, uint64) {
	t.Helper()
	e, err := env.Fanin.Get(handlerstest.Ctx(t), "grp."+groupID)
	if err != nil {
		t.Fatalf("fanin entry: %v", err)
	}
	var st aggregator.FaninState
	if err := json.Unmarshal(e.Value(), &st); err != nil {
		t.Fatalf("fanin entry: %v", err)
	}
	return len(st.Results), e.Revision()
}

func TestAggregatorJoinsGroupOnce(t *testing.T) {
	env := handlerstest.NewEnv(t)
	a := aggregator.NewAggregator(env.Fanin, handlerstest.NopLog)
	group := orch.Group{ID: "grp-two", Expected: 2}
	// Step 2 finishes first: the join still orders results by step.
	second := stepFinishedEvent(t, "fin-2", group, 2)
	first := stepFinishedEvent(t, "fin-1", group, 1)

	var (
		joinID  string
		lastRev uint64
	)
	steps := []struct {
		name      string
		ev        event.Event
		wantJoin  bool
		wantCount int
		wantWrite bool // the fanin entry is written
	}{
		{"first member", second, false, 1, true},
		{"duplicate of the first member", second, false, 1, false},
		{"last member", first, true, 2, true},
		{"redelivery of a member after the join", second, true, 2, false},
		{"redelivery of the last member", first, true, 2, false},
	}
	for _, s := range steps {
		outs, err := a.Handle(handlerstest.Ctx(t), s.ev)
		if err != nil {
			t.Fatalf("%s: Handle: %v", s.name, err)
		}
		count, rev := faninEntry(t, env, group.ID)
		if count != s.wantCount {
			t.Errorf("%s: fanin counts %d members, want %d", s.name, count, s.wantCount)
		}
		if wrote := rev != lastRev; wrote != s.wantWrite {
			t.Errorf("%s: fanin entry written: %v, want %v", s.name, wrote, s.wantWrite)
		}
		lastRev = rev
		if !s.wantJoin {
			if len(outs) != 0 {
				t.Errorf("%s: got %v, want no output", s.name, handlerstest.Types(outs))
			}
			continue
		}
		if len(outs) != 1 || outs[0].Type() != events.TypeGroupJoined {
			t.Fatalf("%s: got %v, want exactly one group.joined", s.name, handlerstest.Types(outs))
		}
		handlerstest.CheckOutputs(t, outs)
		if joinID == "" {
			joinID = outs[0].ID()
		} else if outs[0].ID() != joinID {
			t.Errorf("%s: join id %s, want the same id %s", s.name, outs[0].ID(), joinID)
		}
		gj := handlerstest.Decode[orch.GroupJoined](t, outs[0])
		if gj.Group != group || len(gj.Results) != 2 || gj.Results[0].Step != 1 || gj.Results[1].Step != 2 || gj.Partial {
			t.Errorf("%s: joined = %+v", s.name, gj)
		}
		if gj.Results[0].MemoryKey == "" || gj.Results[0].TaskID != "task-1" {
			t.Errorf("%s: result lost its fields: %+v", s.name, gj.Results[0])
		}
		if gj.Run.Request.RunID != "run-agg" {
			t.Errorf("%s: joined run = %+v", s.name, gj.Run.Request)
		}
	}
}

func TestAggregatorSingleMemberGroup(t *testing.T) {
	env := handlerstest.NewEnv(t)
	outs, err := aggregator.NewAggregator(env.Fanin, handlerstest.NopLog).Handle(handlerstest.Ctx(t), stepFinishedEvent(t, "fin-solo", orch.Group{ID: "grp-solo", Expected: 1}, 1))
	if err != nil {
		t.Fatal(err)
	}
	if len(outs) != 1 || outs[0].Type() != events.TypeGroupJoined {
		t.Fatalf("got %v, want one group.joined", handlerstest.Types(outs))
	}
}

func TestAggregatorConcurrentMembers(t *testing.T) {
	env := handlerstest.NewEnv(t)
	const rounds = 10
	for round := range rounds {
		group := orch.Group{ID: fmt.Sprintf("grp-race-%d", round), Expected: 2}
		evs := []event.Event{
			stepFinishedEvent(t, fmt.Sprintf("race-%d-1", round), group, 1),
			stepFinishedEvent(t, fmt.Sprintf("race-%d-2", round), group, 2),
		}
		var (
			wg    sync.WaitGroup
			mu    sync.Mutex
			joins []event.Event
			errs  []error
		)
		start := make(chan struct{})
		for _, ev := range evs {
			// Separate aggregators (as in separate processes) share the bucket.
			kv, err := env.JS.KeyValue(handlerstest.Ctx(t), handlers.BucketFanin)
			if err != nil {
				t.Fatal(err)
			}
			agg := aggregator.NewAggregator(kv, handlerstest.NopLog)
			wg.Go(func() {
				<-start
				outs, err := agg.Handle(handlerstest.Ctx(t), ev)
				mu.Lock()
				defer mu.Unlock()
				errs = append(errs, err)
				joins = append(joins, handlerstest.OfType(outs, events.TypeGroupJoined)...)
			})
		}
		close(start)
		wg.Wait()
		if err := errors.Join(errs...); err != nil {
			t.Fatalf("round %d: %v", round, err)
		}
		if len(joins) != 1 {
			t.Fatalf("round %d: %d group.joined in total, want exactly 1", round, len(joins))
		}
		if gj := handlerstest.Decode[orch.GroupJoined](t, joins[0]); len(gj.Results) != 2 {
			t.Errorf("round %d: join has %d results", round, len(gj.Results))
		}
		if got, _ := faninEntry(t, env, group.ID); got != 2 {
			t.Errorf("round %d: fanin counts %d", round, got)
		}
	}
}

func TestAggregatorRejects(t *testing.T) {
	env := handlerstest.NewEnv(t)
	a := aggregator.NewAggregator(env.Fanin, handlerstest.NopLog)
	cases := []struct {
		name string
		ev   event.Event
	}{
		{"no group", stepFinishedEvent(t, "fin-nogroup", orch.Group{}, 1)},
		{"empty group", stepFinishedEvent(t, "fin-zero", orch.Group{ID: "grp-zero"}, 1)},
		{"wrong type", handlerstest.NewEvent(t, "not-fin", events.TypeStepRequested, orch.StepRequest{})},
		{"undecodable", handlerstest.NewEvent(t, "bad-fin", events.TypeStepFinished, "nope")},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			outs, err := a.Handle(handlerstest.Ctx(t), tc.ev)
			if err == nil || !events.IsPermanent(err) || len(outs) != 0 {
				t.Errorf("Handle = %v, %v; want a permanent error and no output", handlerstest.Types(outs), err)
			}
		})
	}
}

func TestIsWrongSequence(t *testing.T) {
	env := handlerstest.NewEnv(t)
	ctx := handlerstest.Ctx(t)
	rev, err := env.Fanin.Put(ctx, "grp.cas", []byte(`{}`))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := env.Fanin.Put(ctx, "grp.cas", []byte(`{"x":1}`)); err != nil {
		t.Fatal(err)
	}
	_, lostUpdate := env.Fanin.Update(ctx, "grp.cas", []byte(`{}`), rev) // a real lost CAS on this server
	_, lostCreate := env.Fanin.Create(ctx, "grp.cas", []byte(`{}`))
	if lostUpdate == nil || lostCreate == nil {
		t.Fatalf("stale writes succeeded: %v, %v", lostUpdate, lostCreate)
	}
	// Replicated (R>1) streams answer a lost CAS with code 10164, which
	// kv.Update wraps exactly like this.
	replicated := fmt.Errorf("%w: %w", &jetstream.APIError{Code: 400, ErrorCode: jetstream.JSErrCodeStreamWrongLastSequenceConstant,
		Description: "wrong last sequence"}, jetstream.ErrKeyRevisionMismatch)
	cases := []struct {
		name string
		err  error
		want bool
	}{
		{"lost update", lostUpdate, true},
		{"lost update on a replicated bucket", replicated, true},
		{"other API error", &jetstream.APIError{Code: 503, ErrorCode: jetstream.JSErrCodeJetStreamNotEnabled}, false},
		{"plain error", errors.New("connection closed"), false},
		{"nil", nil, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := kvcas.IsConflict(tc.err); got != tc.want {
				t.Errorf("IsConflict(%v) = %v, want %v", tc.err, got, tc.want)
			}
		})
	}
	// A lost create is recognised by the ErrKeyExists check in record.
	if !errors.Is(lostCreate, jetstream.ErrKeyExists) {
		t.Errorf("lost create %v is not ErrKeyExists", lostCreate)
	}
}

// An aggregator that stops after recording one member of a group, and a
// fresh one that takes the other members' deliveries, still join it: the
// fan-in state is in KV, not in the process. A member delivered three
// times counts once.
func TestAggregatorRestartedMidFanInStillJoins(t *testing.T) {
	env := handlerstest.NewEnv(t)
	group := orch.Group{ID: "grp-restart", Expected: 3}
	first := aggregator.NewAggregator(env.Fanin, handlerstest.NopLog)
	for range 3 {
		outs, err := first.Handle(handlerstest.Ctx(t), stepFinishedEvent(t, "fin-r1", group, 1))
		if err != nil || len(outs) != 0 {
			t.Fatalf("member 1: %d outputs, %v", len(outs), err)
		}
	}
	second := aggregator.NewAggregator(env.Fanin, handlerstest.NopLog) // the restarted process
	if outs, err := second.Handle(handlerstest.Ctx(t), stepFinishedEvent(t, "fin-r2", group, 2)); err != nil || len(outs) != 0 {
		t.Fatalf("member 2: %d outputs, %v", len(outs), err)
	}
	outs, err := second.Handle(handlerstest.Ctx(t), stepFinishedEvent(t, "fin-r3", group, 3))
	if err != nil {
		t.Fatal(err)
	}
	j := handlerstest.Decode[orch.GroupJoined](t, handlerstest.Only(t, outs, events.TypeGroupJoined))
	if len(j.Results) != 3 || j.Partial {
		t.Fatalf("join of %d results (partial %v), want all 3", len(j.Results), j.Partial)
	}
}

// At its deadline a group joins with the members that finished, once; a
// member finishing later joins nothing; a deadline redelivered emits the
// same join id; a group complete before its deadline ignores it.
func TestAggregatorDeadlineCutsTheGroup(t *testing.T) {
	env := handlerstest.NewEnv(t)
	a := aggregator.NewAggregator(env.Fanin, handlerstest.NopLog)
	group := orch.Group{ID: "grp-cut", Expected: 2}
	if _, err := a.Handle(handlerstest.Ctx(t), stepFinishedEvent(t, "fin-c1", group, 1)); err != nil {
		t.Fatal(err)
	}
	deadline := handlerstest.NewEvent(t, "dl-1", events.TypeGroupDeadline, orch.GroupDeadline{Run: handlerstest.PlanRun("run-agg", handlerstest.RankTask), Group: group})
	outs, err := a.Handle(handlerstest.Ctx(t), deadline)
	if err != nil {
		t.Fatal(err)
	}
	joined := handlerstest.Only(t, outs, events.TypeGroupJoined)
	j := handlerstest.Decode[orch.GroupJoined](t, joined)
	if !j.Partial || len(j.Results) != 1 || j.Results[0].Step != 1 {
		t.Fatalf("deadline join %+v: want partial with step 1", j)
	}
	again, err := a.Handle(handlerstest.Ctx(t), deadline)
	if err != nil || handlerstest.Only(t, again, events.TypeGroupJoined).ID() != joined.ID() {
		t.Fatalf("redelivered deadline: %v, %v", handlerstest.Types(again), err)
	}
	late, err := a.Handle(handlerstest.Ctx(t), stepFinishedEvent(t, "fin-c2", group, 2))
	if err != nil || len(late) != 0 {
		t.Fatalf("late member: %v, %v", handlerstest.Types(late), err)
	}
	if n, _ := faninEntry(t, env, group.ID); n != 1 {
		t.Fatalf("the cut group records %d members, want 1", n)
	}

	done := orch.Group{ID: "grp-done", Expected: 1}
	if _, err := a.Handle(handlerstest.Ctx(t), stepFinishedEvent(t, "fin-d1", done, 1)); err != nil {
		t.Fatal(err)
	}
	outs, err = a.Handle(handlerstest.Ctx(t), handlerstest.NewEvent(t, "dl-2", events.TypeGroupDeadline, orch.GroupDeadline{Run: handlerstest.PlanRun("run-agg", handlerstest.RankTask), Group: done}))
	if err != nil || len(outs) != 0 {
		t.Fatalf("deadline of a complete group: %v, %v", handlerstest.Types(outs), err)
	}
}
