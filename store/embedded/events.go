package embedded

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/agentbus/agentbus/store"
)

// traceFetchBatch is the largest batch Trace pulls at once.
const traceFetchBatch = 256

// eventSubject is the subject an event is stored on.
func (s *Store) eventSubject(ev store.Event) string {
	return s.subjectRoot + "." + escape(ev.TenantID) + "." + optionalToken(ev.SessionID)
}

// AppendEvents validates every event first and rejects the whole batch
// with the first *store.SchemaError, writing nothing. Otherwise it
// publishes the events in order to store.events.<tenant>.<session> with
// Nats-Msg-Id set to the event id, so the event id is the document id:
// JetStream drops a re-append within DuplicateWindow and Trace drops any
// later one. Publishing is not atomic: on a broker error some events of
// the batch may be stored, and retrying the batch is safe.
func (s *Store) AppendEvents(ctx context.Context, evs []store.Event) error {
	payloads := make([][]byte, len(evs))
	for i, ev := range evs {
		data, err := store.Encode(store.IndexEvents, ev)
		if err != nil {
			return err
		}
		payloads[i] = data
	}
	stream := s.events.CachedInfo().Config.Name
	if len(evs) == 1 {
		msg := &nats.Msg{Subject: s.eventSubject(evs[0]), Data: payloads[0]}
		if _, err := s.js.PublishMsg(ctx, msg, jetstream.WithMsgID(evs[0].EventID), jetstream.WithExpectStream(stream)); err != nil {
			return fmt.Errorf("embedded: append event %q: %w", evs[0].EventID, err)
		}
		return nil
	}
	// Pipelined: every event is sent, then every PubAck awaited.
	futures := make([]jetstream.PubAckFuture, len(evs))
	for i, ev := range evs {
		msg := &nats.Msg{Subject: s.eventSubject(ev), Data: payloads[i]}
		f, err := s.js.PublishMsgAsync(msg, jetstream.WithMsgID(ev.EventID), jetstream.WithExpectStream(stream))
		if err != nil {
			return fmt.Errorf("embedded: append event %q: %w", ev.EventID, err)
		}
		futures[i] = f
	}
	for i, f := range futures {
		select {
		case <-f.Ok():
		case err := <-f.Err():
			return fmt.Errorf("embedded: append event %q: %w", evs[i].EventID, err)
		case <-ctx.Done():
			return fmt.Errorf("embedded: append events: %w", ctx.Err())
		}
	}
	return nil
}

// Trace returns the events of q.SessionID and/or q.PlanID within
// q.TenantID, ordered by ts and then by append order, each event id once
// (its first append). It reads a snapshot: events appended while it runs
// may or may not be included.
func (s *Store) Trace(ctx context.Context, q store.TraceQuery) ([]store.Event, error) {
	if q.TenantID == "" {
		return nil, fmt.Errorf("embedded: trace without tenant: %w", store.ErrInvalidArgument)
	}
	if q.SessionID == "" && q.PlanID == "" {
		return nil, fmt.Errorf("embedded: trace without session or plan: %w", store.ErrInvalidArgument)
	}
	filter := s.subjectRoot + "." + escape(q.TenantID) + ".>"
	if q.SessionID != "" {
		filter = s.subjectRoot + "." + escape(q.TenantID) + "." + escape(q.SessionID)
	}
	var out []store.Event
	seen := map[string]bool{}
	err := s.readSubject(ctx, filter, func(data []byte) error {
		var ev store.Event
		if err := json.Unmarshal(data, &ev); err != nil {
			return fmt.Errorf("embedded: decode event: %w", err)
		}
		if seen[ev.EventID] || q.PlanID != "" && ev.PlanID != q.PlanID {
			return nil
		}
		seen[ev.EventID] = true
		out = append(out, ev)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("embedded: trace: %w", err)
	}
	slices.SortStableFunc(out, func(a, b store.Event) int { return a.TS.Compare(b.TS) })
	return out, nil
}

// readSubject calls fn, in stream order, with the data of every message
// stored on filter when it is called. It uses a short-lived ephemeral
// consumer and stops once the messages pending at creation are read.
func (s *Store) readSubject(ctx context.Context, filter string, fn func([]byte) error) error {
	return s.readSubjectFrom(ctx, filter, time.Time{}, fn)
}

// storeClockSlack is how much earlier than an event's ts the stream may
// have stored it (the clocks of its producer and of the server differ).
const storeClockSlack = 5 * time.Minute

// readSubjectFrom is readSubject from the messages stored at from on (all
// of them when from is zero).
func (s *Store) readSubjectFrom(ctx context.Context, filter string, from time.Time, fn func([]byte) error) error {
	cfg := jetstream.ConsumerConfig{
		FilterSubjects:    []string{filter},
		DeliverPolicy:     jetstream.DeliverAllPolicy,
		AckPolicy:         jetstream.AckNonePolicy,
		MemoryStorage:     true,
		InactiveThreshold: time.Minute,
	}
	if !from.IsZero() {
		cfg.DeliverPolicy, cfg.OptStartTime = jetstream.DeliverByStartTimePolicy, &from
	}
	cons, err := s.events.CreateConsumer(ctx, cfg)
	if err != nil {
		return fmt.Errorf("create consumer: %w", err)
	}
	info := cons.CachedInfo()
	defer func() {
		// Best effort: the server also removes it after InactiveThreshold.
		dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		_ = s.events.DeleteConsumer(dctx, info.Name)
	}()
	remaining := info.NumPending
	for remaining > 0 {
		if err := ctx.Err(); err != nil {
			return err
		}
		batch, err := cons.FetchNoWait(int(min(remaining, traceFetchBatch)))
		if err != nil {
			return fmt.Errorf("fetch: %w", err)
		}
		got, caughtUp := 0, false
		for msg := range batch.Messages() {
			got++
			remaining--
			if err := fn(msg.Data()); err != nil {
				return err
			}
			if md, err := msg.Metadata(); err == nil && md.NumPending == 0 {
				caughtUp = true
			}
		}
		if err := batch.Error(); err != nil {
			return fmt.Errorf("fetch: %w", err)
		}
		if got == 0 || caughtUp {
			// Nothing more is available (for example messages were
			// removed by limits while reading): the snapshot is complete.
			return nil
		}
	}
	return nil
}

// Events returns the tenant's events that match q, newest first, as
// store.EventQuery specifies: it reads every event stored under the
// tenant's subjects, keeps the first append of each event id among the
// matching ones, sorts them by store.CompareNewestFirst and returns the
// first q.EffectiveLimit(). It reads a snapshot, as Trace does.
func (s *Store) Events(ctx context.Context, q store.EventQuery) ([]store.Event, error) {
	if q.TenantID == "" {
		return nil, fmt.Errorf("embedded: events without tenant: %w", store.ErrInvalidArgument)
	}
	var out []store.Event
	seen := map[string]bool{}
	filter := s.subjectRoot + "." + escape(q.TenantID) + ".>"
	var from time.Time
	if !q.Since.IsZero() {
		// An event is stored after it happened: the stream is read from
		// Since (less a margin for clocks that disagree), not from its
		// start.
		from = q.Since.Add(-storeClockSlack)
	}
	err := s.readSubjectFrom(ctx, filter, from, func(data []byte) error {
		var ev store.Event
		if err := json.Unmarshal(data, &ev); err != nil {
			return fmt.Errorf("embedded: decode event: %w", err)
		}
		if seen[ev.EventID] || !q.Match(ev) {
			return nil
		}
		seen[ev.EventID] = true
		out = append(out, ev)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("embedded: events: %w", err)
	}
	slices.SortFunc(out, store.CompareNewestFirst)
	if limit := q.EffectiveLimit(); len(out) > limit {
		out = out[:limit]
	}
	return out, nil
}
