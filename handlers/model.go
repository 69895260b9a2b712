package handlers

import (
	"context"
	"errors"
	"fmt"

	"github.com/cloudevents/sdk-go/v2/event"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/agentbus/agentbus/events"
	"github.com/agentbus/agentbus/handlers/ledger"
	"github.com/agentbus/agentbus/llm"
	"github.com/agentbus/agentbus/orch"
	"github.com/agentbus/agentbus/runclient"
)

// ModelCalls emits one model.called audit event per call recorded in rec
// (task, prompt version, provider, model, tokens, cost, latency) and
// returns their summed usage, which the caller adds to the run's totals.
func (a *Outbox) ModelCalls(lin events.Audit, rec *llm.Recorder) llm.Usage {
	for _, c := range rec.Calls() {
		a.Audit("model.called", lin, c)
	}
	return rec.Total()
}

// modelFailure returns the terminal code a model error ends the run with:
// VALIDATION_FAIL when structured output stayed invalid after its repairs,
// UNAVAILABLE_DEP when the provider was unavailable after its retries,
// BUDGET_EXHAUSTED when the run's budget refused the call (TIMEOUT when
// its wall clock ran out). Any other error is transient ("" and false):
// the message is redelivered.
func modelFailure(err error) (string, bool) {
	var ex *ledger.Exhausted
	switch {
	case errors.As(err, &ex) && ex.Dim == orch.DimWallClockS:
		return orch.CodeTimeout, true
	case errors.As(err, &ex):
		return orch.CodeBudgetExhausted, true
	case errors.Is(err, llm.ErrInvalidOutput):
		return orch.CodeValidationFail, true
	case errors.Is(err, llm.ErrUnavailable):
		return orch.CodeUnavailableDep, true
	}
	return "", false
}

// FailureOf is the run-ending failure a model error is, with a refused
// budget draw's evidence, or nil for a transient error.
func FailureOf(err error) *orch.Failure {
	code, ok := modelFailure(err)
	if !ok {
		return nil
	}
	f := &orch.Failure{Code: code, Reason: err.Error()}
	var ex *ledger.Exhausted
	if errors.As(err, &ex) {
		f.Evidence = ex.Evidence()
	}
	return f
}

// Replies publishes streamed answer chunks on the REPLY stream
// (reply.<tenant>.<session>), where the ingress forwards them to a
// streaming caller.
type Replies struct {
	JS jetstream.JetStream
}

// ReplyStream is one streamed message: its chunks share a message id, and
// their event ids derive from the input event, so a redelivered hop that
// streams the same text stores each chunk once.
type ReplyStream struct {
	js      jetstream.JetStream
	in      event.Event
	name    string // distinguishes the hop's messages of one type
	chunk   runclient.Chunk
	n       int
	futures []jetstream.PubAckFuture
	err     error
}

// Open starts a streamed message of type msgType for the input event in.
// A nil Replies streams nothing.
func (r *Replies) Open(in event.Event, msgType string) *ReplyStream {
	return r.OpenNamed(in, msgType, msgType)
}

// OpenNamed starts a streamed message of type msgType named name among
// the input's messages: a hop that streams several of one type names
// each.
func (r *Replies) OpenNamed(in event.Event, msgType, name string) *ReplyStream {
	if r == nil || r.JS == nil {
		return nil
	}
	m := events.MetaOf(in)
	return &ReplyStream{js: r.JS, in: in, name: name, chunk: runclient.Chunk{
		MessageID: events.DeriveID(in.ID(), "reply/"+name), SessionID: m.Session, MessageType: msgType}}
}

// Write publishes one chunk without waiting for its PubAck.
func (s *ReplyStream) Write(content string, end bool) {
	if s == nil || s.err != nil {
		return
	}
	c := s.chunk
	c.Content, c.EndOfMessage = content, end
	s.n++
	ev, err := events.Child(s.in, fmt.Sprintf("reply/%s/%d", s.name, s.n), events.TypeReplyChunk, c)
	if err != nil {
		s.err = err
		return
	}
	m, err := events.ToMsg(ev)
	if err != nil {
		s.err = err
		return
	}
	f, err := s.js.PublishMsgAsync(m)
	if err != nil {
		s.err = err
		return
	}
	s.futures = append(s.futures, f)
}

// Close ends the message (an empty chunk with end_of_message) and waits
// for every chunk's PubAck.
func (s *ReplyStream) Close(ctx context.Context) error {
	if s == nil {
		return nil
	}
	s.Write("", true)
	return s.Wait(ctx)
}

// Wait waits for the PubAck of every chunk written.
func (s *ReplyStream) Wait(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, events.CallTimeout) // a PubAck lost with a dying node
	defer cancel()
	for _, f := range s.futures {
		if s.err != nil {
			break
		}
		select {
		case <-f.Ok():
		case err := <-f.Err():
			s.err = err
		case <-ctx.Done():
			s.err = ctx.Err()
		}
	}
	if s.err != nil {
		return fmt.Errorf("handlers: stream reply: %w", s.err)
	}
	return nil
}
