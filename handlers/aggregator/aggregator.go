package aggregator

import (
	"context"
	"fmt"
	"sort"

	"github.com/cloudevents/sdk-go/v2/event"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"

	"github.com/agentbus/agentbus/events"
	"github.com/agentbus/agentbus/handlers"
	"github.com/agentbus/agentbus/kvcas"
	"github.com/agentbus/agentbus/orch"
)

// Aggregator is the fan-in: it records each finished step of a group in
// the fanin bucket by compare-and-swap, so a duplicate never counts twice,
// and emits group.joined once every member has finished.
type Aggregator struct {
	Fanin jetstream.KeyValue
	Log   zerolog.Logger
}

// NewAggregator returns an aggregator on the fanin bucket.
func NewAggregator(fanin jetstream.KeyValue, log zerolog.Logger) *Aggregator {
	return &Aggregator{Fanin: fanin, Log: log}
}

// faninState is a group's entry in the fanin bucket. Cut is set when the
// group's deadline joined it with what had finished: a member finishing
// later is not recorded and joins nothing.
type faninState struct {
	Expected int                     `json:"expected"`
	Results  map[int]orch.StepResult `json:"results"`
	Cut      bool                    `json:"cut,omitempty"`
}

// Routes are the events the aggregator consumes.
func (a *Aggregator) Routes() []events.Route {
	return []events.Route{
		events.On(events.TypeStepFinished, a.stepFinished),
		events.On(events.TypeGroupDeadline, a.deadline),
	}
}

// Handle is the aggregator's events.Handler.
func (a *Aggregator) Handle(ctx context.Context, ev event.Event) ([]event.Event, error) {
	return events.Dispatch(handlers.RoleAggregator, a.Routes()...)(ctx, ev)
}

func (a *Aggregator) stepFinished(ctx context.Context, ev event.Event, sf orch.StepFinished) ([]event.Event, error) {
	state, err := a.update(ctx, sf.Group, func(s *faninState) bool {
		if _, dup := s.Results[sf.Result.Step]; dup || s.Cut {
			return false
		}
		s.Results[sf.Result.Step] = sf.Result
		return true
	})
	if err != nil || state.Cut || len(state.Results) < state.Expected {
		return nil, err
	}
	// Complete. Every member's delivery that sees the group complete emits
	// the same join id, so a crash between the CAS and the publish is
	// repaired by the redelivery, and JetStream keeps one join.
	return joinEvent(ev, sf.Run, sf.Group, state)
}

// deadline joins a group whose deadline passed with the members that
// finished, marking it cut so that none joins it later. A group complete
// before its deadline was joined by its last member: the deadline does
// nothing. A redelivered deadline of a cut group emits the same join id
// again, so the stream keeps one.
func (a *Aggregator) deadline(ctx context.Context, ev event.Event, gd orch.GroupDeadline) ([]event.Event, error) {
	state, err := a.update(ctx, gd.Group, func(s *faninState) bool {
		if s.Cut || len(s.Results) >= s.Expected {
			return false
		}
		s.Cut = true
		return true
	})
	if err != nil || !state.Cut {
		return nil, err
	}
	return joinEvent(ev, gd.Run, gd.Group, state)
}

// joinEvent is a group's group.joined event: its members' results by step,
// partial when the deadline cut it.
func joinEvent(ev event.Event, run orch.RunState, g orch.Group, state faninState) ([]event.Event, error) {
	results := make([]orch.StepResult, 0, len(state.Results))
	for _, r := range state.Results {
		results = append(results, r)
	}
	sort.Slice(results, func(i, j int) bool { return results[i].Step < results[j].Step })
	joined, err := events.New(handlers.JoinID(g.ID), events.TypeGroupJoined, events.MetaOf(ev),
		orch.GroupJoined{Run: run, Group: g, Results: results, Partial: state.Cut})
	if err != nil {
		return nil, err
	}
	return []event.Event{joined}, nil
}

// update applies change to the group's fanin entry with
// compare-and-swap and returns the entry; change reports whether it
// changed anything (nothing is written when it did not).
func (a *Aggregator) update(ctx context.Context, g orch.Group, change func(*faninState) bool) (faninState, error) {
	key := "grp." + g.ID
	e, err := kvcas.Update(ctx, a.Fanin, key, func(s *faninState, rev uint64) (bool, error) {
		if rev == 0 {
			s.Expected = g.Expected
		}
		if s.Results == nil {
			s.Results = map[int]orch.StepResult{}
		}
		return change(s), nil
	})
	if err != nil {
		// A corrupt entry (kvcas.ErrCorrupt) is permanent: dead-lettered
		// at once. A lost race or a KV outage is retried.
		return e.Value, fmt.Errorf("handlers: fanin update: %w", err)
	}
	return e.Value, nil
}
