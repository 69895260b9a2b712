package handlers

import (
	"context"
	"fmt"

	"github.com/cloudevents/sdk-go/v2/event"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/agentbus/agentbus/events"
	"github.com/agentbus/agentbus/llm"
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
