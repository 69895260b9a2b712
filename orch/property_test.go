package orch

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"testing"
	"time"
)

// sim drives runs through the decider the way the bus does, with no bus:
// every message is delivered in a random order, any delivery may be
// repeated (a worker crashed before its ack), and each output's id derives
// from its input's id and key (or its run scope), so a store with a
// duplicate window keeps the first copy only. Planner and executors are
// random too, and may answer a redelivery differently from the first
// delivery. Some runs are cancelled at a random moment, so a redelivery
// may see a cancel its first delivery did not.
type sim struct {
	t        *testing.T
	rng      *rand.Rand
	pending  []msg
	stored   map[string]bool // ids the "stream" holds
	fanin    map[string]map[int]StepResult
	finished map[string][]RunResult // run id → stored results
	done     map[string]map[int]bool
	started  map[string]map[int]int // run → step index → dispatches stored
	clock    time.Time
	dropped  int             // outputs the duplicate window dropped
	cancels  map[string]bool // cancelled runs
}

type msg struct {
	id   string
	data any // RunRequest, PlanRequest, PlanProposal, StepRequest, StepFinished, GroupJoined
}

func (s *sim) now() time.Time {
	s.clock = s.clock.Add(time.Duration(s.rng.IntN(1000)) * time.Millisecond)
	return s.clock
}

// store appends an output unless the stream already holds its id.
func (s *sim) store(parent, key string, data any) {
	id := deriveID(parent, key)
	if s.stored[id] {
		return
	}
	s.stored[id] = true
	s.pending = append(s.pending, msg{id: id, data: data})
}

// decide runs the decider on one input and checks the invariants every
// decision keeps.
func (s *sim) decide(m msg, state State, in Input) {
	d := Decide(state, in)
	emitsItsState(s.t, d)
	if d.Synthesise != nil {
		next := Decide(d.State, Synthesised{Answer: "answer", At: s.now()})
		next.Emits = append(d.Emits, next.Emits...)
		d = next
	}
	_, first := in.(Requested)
	if c, ok := in.(Cancelled); ok {
		_, first = c.Input.(Requested)
		if len(d.Emits) != 1 || d.Ended == nil || d.Ended.TerminalCode != CodeUserCancel {
			s.t.Fatalf("cancelled run emits %+v, want its USER_CANCEL result only", d.Emits)
		}
	}
	if !first && d.State.Seq <= state.Seq {
		s.t.Fatalf("seq went from %d to %d on %T", state.Seq, d.State.Seq, in)
	}
	for _, e := range d.Emits {
		id := deriveID(m.id, e.Key)
		if e.RunScope != "" {
			id = deriveID(e.RunScope, e.Key)
		}
		if s.stored[id] {
			s.dropped++
			continue
		}
		switch v := e.Data.(type) {
		case StepRequest:
			run := v.Run.Request.RunID
			if s.done[run][v.Step] {
				s.t.Fatalf("run %s: completed step %d dispatched again", run, v.Step)
			}
			if v.Run.Seq <= state.Seq {
				s.t.Fatalf("run %s: step request carries seq %d after %d", run, v.Run.Seq, state.Seq)
			}
			s.started[run][v.Step]++
		case RunResult:
			s.finished[v.RunID] = append(s.finished[v.RunID], v)
		}
		s.stored[id] = true
		s.pending = append(s.pending, msg{id: id, data: e.Data})
	}
}

// emitsItsState fails t unless every run state d emits is d's own state:
// the router lets the message that carries its hop's trail stand for the
// plan projection of the hop (handlers.PlanProjected), so a message must
// never carry a state the decision went on to change.
func emitsItsState(t *testing.T, d Decision) {
	t.Helper()
	for _, e := range d.Emits {
		var run RunState
		switch v := e.Data.(type) {
		case PlanRequest:
			run = v.Run
		case StepRequest:
			run = v.Run
		case GroupDeadline:
			run = v.Run
		default:
			continue
		}
		if !reflect.DeepEqual(run, d.State) {
			t.Fatalf("%s (%T) carries the state at seq %d, the decision's is at seq %d and differs", e.Key, e.Data, run.Seq, d.State.Seq)
		}
	}
}

// routed is what the router decides on: in, or Cancelled once the run is
// cancelled.
func (s *sim) routed(runID string, in Input) Input {
	if !s.cancels[runID] {
		return in
	}
	return Cancelled{Input: in, By: "u1", RequestedAt: s.clock, At: s.now()}
}

// deliver hands one message to the role that consumes it.
func (s *sim) deliver(m msg) {
	switch v := m.data.(type) {
	case RunRequest:
		s.decide(m, State{}, s.routed(v.RunID, Requested{Request: v, TaskTypes: taskTypes, At: s.now()}))
	case PlanRequest:
		// The planner: 1 to 3 steps, later ones depending on earlier ones,
		// numbered after the steps the plan already has.
		first := 1
		for _, st := range v.Run.Plan.Steps {
			first = max(first, st.Index+1)
		}
		var steps []Step
		for i := range 1 + s.rng.IntN(3) {
			st := Step{Index: first + i, Task: fmt.Sprintf("t%d", first+i), ReturnSpec: shape}
			if i > 0 && s.rng.IntN(2) == 0 {
				st.DependsOn = []int{first + s.rng.IntN(i)}
			}
			steps = append(steps, st)
		}
		p := PlanProposal{Run: v.Run, Steps: steps}
		if s.rng.IntN(40) == 0 {
			p = PlanProposal{Run: v.Run, Infeasible: "cannot"}
		}
		s.store(m.id, "proposed", p)
	case PlanProposal:
		s.decide(m, v.Run, s.routed(v.Run.Request.RunID, Planned{Proposal: v, At: s.now()}))
	case StepRequest:
		outcome := OutcomeComplete
		switch {
		case s.cancels[v.Run.Request.RunID]:
			outcome = OutcomeCancelled
		case s.rng.IntN(4) == 0:
			outcome = OutcomeFailed
		}
		st := v.Run.Plan.Live(v.Step)
		s.store(m.id, "finished", StepFinished{Run: v.Run, Group: v.Group, Result: StepResult{
			Step: v.Step, TaskID: st.TaskID, Outcome: outcome, MemoryKey: "mem-" + st.TaskID}})
	case StepFinished:
		// The aggregator: first result per member counts; the join id
		// derives from the group, so every completing delivery emits the
		// same join.
		g := s.fanin[v.Group.ID]
		if g == nil {
			g = map[int]StepResult{}
			s.fanin[v.Group.ID] = g
		}
		if _, dup := g[v.Result.Step]; !dup {
			g[v.Result.Step] = v.Result
		}
		if len(g) == v.Group.Expected {
			var results []StepResult
			for _, st := range v.Run.Plan.Steps {
				if r, ok := g[st.Index]; ok && st.Status == StepRunning {
					results = append(results, r)
				}
			}
			s.store(v.Group.ID, "joined", GroupJoined{Run: v.Run, Group: v.Group, Results: results})
		}
	case GroupJoined:
		for _, r := range v.Results {
			if r.Outcome == OutcomeComplete {
				s.done[v.Run.Request.RunID][r.Step] = true
			}
		}
		s.decide(m, v.Run, s.routed(v.Run.Request.RunID, Joined{Results: v.Results, At: s.now()}))
	}
}

// TestDecideUnderRedeliveryAndReordering: whatever the order of
// deliveries, however many are repeated and whenever a run is cancelled,
// every run ends with exactly one stored result, no completed step is
// dispatched again, a cancelled input dispatches nothing and seq only
// grows.
func TestDecideUnderRedeliveryAndReordering(t *testing.T) {
	codes, dropped := map[string]int{}, 0
	for seed := range uint64(300) {
		s := &sim{t: t, rng: rand.New(rand.NewPCG(seed, 7)), stored: map[string]bool{}, fanin: map[string]map[int]StepResult{},
			finished: map[string][]RunResult{}, done: map[string]map[int]bool{}, started: map[string]map[int]int{}, clock: t0,
			cancels: map[string]bool{}}
		runs := 1 + s.rng.IntN(3)
		for i := range runs {
			id := fmt.Sprintf("run-%d-%d", seed, i)
			s.done[id], s.started[id] = map[int]bool{}, map[int]int{}
			s.store("ingress", id, request(id))
		}
		for steps := 0; len(s.pending) > 0; steps++ {
			if steps > 10_000 {
				t.Fatalf("seed %d: runs never settle", seed)
			}
			if s.rng.IntN(60) == 0 { // a user cancels one of the runs
				s.cancels[fmt.Sprintf("run-%d-%d", seed, s.rng.IntN(runs))] = true
			}
			i := s.rng.IntN(len(s.pending))
			m := s.pending[i]
			if s.rng.IntN(3) != 0 { // two in three deliveries are acked
				s.pending = append(s.pending[:i], s.pending[i+1:]...)
			}
			s.deliver(m)
		}
		for i := range runs {
			id := fmt.Sprintf("run-%d-%d", seed, i)
			if n := len(s.finished[id]); n != 1 {
				t.Fatalf("seed %d: run %s stored %d results, want exactly 1: %+v", seed, id, n, s.finished[id])
			}
			for step, n := range s.started[id] {
				if n != 1 {
					t.Fatalf("seed %d: run %s dispatched step %d %d times", seed, id, step, n)
				}
			}
			codes[s.finished[id][0].TerminalCode]++
		}
		dropped += s.dropped
	}
	// The simulation must have exercised what it claims to.
	if dropped == 0 || codes[CodeSuccess] == 0 || codes[CodeRepeatedFailure] == 0 || codes[CodeImpossible] == 0 ||
		codes[CodeUserCancel] == 0 {
		t.Errorf("duplicates dropped %d, terminal codes %v: the simulation missed a path", dropped, codes)
	}
	t.Logf("terminal codes %v, duplicate outputs dropped %d", codes, dropped)
}
