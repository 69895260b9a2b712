package embedded

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"slices"
	"time"

	json "github.com/go-json-experiment/json/v1"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/agentbus/agentbus/events"
	"github.com/agentbus/agentbus/store"
)

// traceFetchBatch is the largest batch Trace pulls at once.
const traceFetchBatch = 256

// eventSubject is the subject an event is stored on.
func (s *Store) eventSubject(ev store.Event) string {
	return s.subjectRoot + "." + escape(ev.TenantID) + "." + optionalToken(ev.SessionID)
}

// maxEventBatch bounds the data of one stored message of events.
const maxEventBatch = 256 << 10

// AppendEvents validates every event first and rejects the whole batch
// with the first *store.SchemaError, writing nothing. Otherwise it
// publishes the events in order to store.events.<tenant>.<session>: one
// message per subject holding that subject's events as a JSON array (up
// to maxEventBatch bytes a message; a lone event as its object), with
// Nats-Msg-Id derived from the event ids it holds, so JetStream drops a
// re-append of the same events within DuplicateWindow, and Trace drops any
// later copy of an event id. Storing a hop's events as one message rather
// than one each halves the messages a run costs the server. Publishing is
// not atomic: on a broker error some messages may be stored, and retrying
// the batch is safe.
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
	// Each message is the list of the events it holds, filled in order
	// while it stays within maxEventBatch; its data is then built once.
	type batch struct {
		subject string
		events  []int
		size    int // of the data as an array: brackets and commas included
	}
	var batches []*batch
	bySubject := map[string]*batch{} // the message being filled for each subject
	for i, ev := range evs {
		subject := s.eventSubject(ev)
		b := bySubject[subject]
		if b == nil || b.size+len(payloads[i])+1 > maxEventBatch {
			b = &batch{subject: subject, size: 1}
			bySubject[subject] = b
			batches = append(batches, b)
		}
		b.events = append(b.events, i)
		b.size += len(payloads[i]) + 1
	}
	// A PubAck lost with a dying node fails the append in CallTimeout
	// rather than holding its caller for the caller's whole deadline.
	ctx, cancel := context.WithTimeout(ctx, events.CallTimeout)
	defer cancel()
	futures := make([]jetstream.PubAckFuture, len(batches))
	for i, b := range batches {
		m := &nats.Msg{Subject: b.subject, Data: payloads[b.events[0]]}
		if len(b.events) > 1 {
			m.Data = make([]byte, 0, b.size)
			for j, at := range b.events {
				sep := byte(',')
				if j == 0 {
					sep = '['
				}
				m.Data = append(append(m.Data, sep), payloads[at]...)
			}
			m.Data = append(m.Data, ']')
		}
		f, err := s.js.PublishMsgAsync(m, jetstream.WithMsgID(batchID(evs, b.events)), jetstream.WithExpectStream(stream))
		if err != nil {
			return fmt.Errorf("embedded: append events: %w", err)
		}
		futures[i] = f
	}
	for _, f := range futures {
		select {
		case <-f.Ok():
		case err := <-f.Err():
			return fmt.Errorf("embedded: append events: %w", err)
		case <-ctx.Done():
			return fmt.Errorf("embedded: append events: %w", ctx.Err())
		}
	}
	return nil
}

// batchID is the message id of the events of evs at the indexes at: a
// lone event's own id, else a hash of their ids, NUL-separated.
func batchID(evs []store.Event, at []int) string {
	if len(at) == 1 {
		return evs[at[0]].EventID
	}
	h := sha256.New()
	for j, i := range at {
		if j > 0 {
			h.Write([]byte{0})
		}
		h.Write([]byte(evs[i].EventID))
	}
	return "events-" + hex.EncodeToString(h.Sum(nil)[:16])
}

// decodeEvents calls fn with each event stored in data: an array of them,
// or one.
func decodeEvents(data []byte, fn func(store.Event) error) error {
	if len(data) > 0 && data[0] == '[' {
		var evs []store.Event
		if err := json.Unmarshal(data, &evs); err != nil {
			return fmt.Errorf("embedded: decode events: %w", err)
		}
		for _, ev := range evs {
			if err := fn(ev); err != nil {
				return err
			}
		}
		return nil
	}
	var ev store.Event
	if err := json.Unmarshal(data, &ev); err != nil {
		return fmt.Errorf("embedded: decode event: %w", err)
	}
	return fn(ev)
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
		return decodeEvents(data, func(ev store.Event) error {
			if seen[ev.EventID] || q.PlanID != "" && ev.PlanID != q.PlanID {
				return nil
			}
			seen[ev.EventID] = true
			out = append(out, ev)
			return nil
		})
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
	cctx, cancel := context.WithTimeout(ctx, events.CallTimeout) // one request: its reply may be lost with a dying node
	cons, err := s.events.CreateConsumer(cctx, cfg)
	cancel()
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
		return decodeEvents(data, func(ev store.Event) error {
			if seen[ev.EventID] || !q.Match(ev) {
				return nil
			}
			seen[ev.EventID] = true
			out = append(out, ev)
			return nil
		})
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
