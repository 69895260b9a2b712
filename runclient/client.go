package runclient

import (
	"context"
	"errors"
	"fmt"
	"sync"

	json "github.com/go-json-experiment/json/v1"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/agentbus/agentbus/events"
	"github.com/agentbus/agentbus/orch"
	"github.com/agentbus/agentbus/tracing"
)

// Errors of the NATS client.
var (
	// ErrClosed is returned by Submit and Wait once the Client is closed.
	ErrClosed = errors.New("runclient: closed")
	// ErrAwaited refuses a second Submit of a run id still awaited.
	ErrAwaited = errors.New("runclient: run already awaited")
)

// Config configures a Client. The zero value is usable.
type Config struct {
	// Source names the submitting process in the source of its
	// run.requested events ("ingress", "chaos"); default "agentbus".
	Source string
	// OnError receives the errors the run.finished consumer reports (a
	// lost connection, a consumer being recreated); nil drops them.
	OnError func(error)
	// OnFinished, when set, receives every run.finished the client sees
	// (any process's run, duplicates included), not the parked runs.
	OnFinished func(orch.RunResult)
}

// Client submits runs on NATS and awaits their run.finished. It is safe
// for concurrent use.
type Client struct {
	js      jetstream.JetStream
	cfg     Config
	results *follower

	mu      sync.Mutex
	waiters map[string]chan orch.RunResult
	closed  chan struct{}
	once    sync.Once
}

// New follows finished runs and returns the client; Close stops it.
//
// Every client sees every run.finished and hands it to the run it awaits,
// if any. It reads them from the AGENT stream with a consumer, not a core
// subscription: after a NATS restart, a dropped connection or the death of
// the cluster node that held the consumer, a new one resumes after the
// last result it saw, so a run that finished meanwhile still answers its
// waiter.
func New(ctx context.Context, js jetstream.JetStream, cfg Config) (*Client, error) {
	c := &Client{js: js, cfg: cfg, waiters: map[string]chan orch.RunResult{}, closed: make(chan struct{})}
	stream, err := js.Stream(ctx, events.StreamAgent)
	if err != nil {
		return nil, fmt.Errorf("runclient: stream %s: %w", events.StreamAgent, err)
	}
	info, err := stream.Info(ctx)
	if err != nil {
		return nil, fmt.Errorf("runclient: stream %s: %w", events.StreamAgent, err)
	}
	// Start after everything stored now, by sequence: a start policy of
	// "new" would be applied again if the consumer is recreated before it
	// delivered anything, and skip the results stored meanwhile.
	c.results = newFollower(js, []string{"agent.run.finished.*", "agent.run.parked.*"}, info.State.LastSeq+1, c.finished, cfg.OnError)
	if err := c.results.start(ctx); err != nil {
		return nil, fmt.Errorf("runclient: follow run.finished: %w", err)
	}
	return c, nil
}

// finished hands a run.finished to its waiter. A result nobody awaits
// (another process's run) and a duplicate are dropped.
func (c *Client) finished(m jetstream.Msg) {
	ev, err := events.FromMsg(m.Headers(), m.Data())
	if err != nil {
		return
	}
	var res orch.RunResult
	if ev.Type() == events.TypeRunParked {
		var p orch.RunParked
		if events.Decode(ev, &p) != nil {
			return
		}
		res = ParkedResult(p)
	} else if events.Decode(ev, &res) != nil {
		return
	} else if c.cfg.OnFinished != nil {
		c.cfg.OnFinished(res)
	}
	// The callers of the requests whose messages answered the run's
	// questions wait for it too.
	for _, id := range append([]string{res.RunID}, res.Answered...) {
		c.mu.Lock()
		ch := c.waiters[id]
		c.mu.Unlock()
		if ch != nil {
			select {
			case ch <- res:
			default:
			}
		}
	}
}

// ParkedResult is the result a waiter of a run parked at a gate gets: no
// terminal code, the plan's status (awaiting_gate, paused) and the gate's
// packet as its detail. The run goes on once the gate is decided.
func ParkedResult(p orch.RunParked) orch.RunResult {
	detail, _ := json.Marshal(p.Gate)
	return orch.RunResult{RunID: p.RunID, TenantID: p.TenantID, SessionID: p.SessionID, PlanID: p.PlanID, Status: p.Status,
		Response: GateMessage(p.Gate), Detail: detail, Answered: p.Answered}
}

// Parked reports whether res says its run waits at a gate (ParkedResult)
// rather than that it ended.
func Parked(res orch.RunResult) bool { return res.TerminalCode == "" && res.Status != "" }

// Submit publishes a run.requested for req and returns the run awaiting
// its result. The waiter is in place before the request is published, so
// no result can pass unseen; the caller Closes the Pending run. ctx bounds
// the publication only. req.RunID is required, and is the event's id: a
// resubmitted request is stored once.
func (c *Client) Submit(ctx context.Context, req orch.RunRequest) (*Pending, error) {
	if req.RunID == "" {
		return nil, errors.New("runclient: submit: the run id is required")
	}
	p, err := c.await(req.RunID)
	if err != nil {
		return nil, err
	}
	ev, err := events.New(req.RunID, events.TypeRunRequested, events.Meta{
		Tenant: req.TenantID, Session: req.SessionID, Run: req.RunID, SourceProcess: c.cfg.Source,
		TraceParent: tracing.TraceParent(ctx), // the caller's span, if any, is the run's root
	}, req)
	if err == nil {
		p.duplicate, err = events.PublishOnce(ctx, c.js, ev)
	}
	if err != nil {
		p.Close()
		return nil, fmt.Errorf("runclient: submit %s: %w", req.RunID, err)
	}
	return p, nil
}

// Run submits req and waits for its result until ctx ends.
func (c *Client) Run(ctx context.Context, req orch.RunRequest) (orch.RunResult, error) {
	p, err := c.Submit(ctx, req)
	if err != nil {
		return orch.RunResult{}, err
	}
	defer p.Close()
	return p.Wait(ctx)
}

// Await awaits the next result of a run submitted already (one parked at
// a gate, whose decision is about to be sent): register it before the
// decision, so that no result passes unseen. ErrAwaited when the run is
// awaited already through this client.
func (c *Client) Await(runID string) (*Pending, error) { return c.await(runID) }

// await registers the waiter of runID.
func (c *Client) await(runID string) (*Pending, error) {
	p := &Pending{c: c, id: runID, ch: make(chan orch.RunResult, 1)}
	c.mu.Lock()
	defer c.mu.Unlock()
	select {
	case <-c.closed:
		return nil, ErrClosed
	default:
	}
	if c.waiters[runID] != nil {
		return nil, fmt.Errorf("%w: %s", ErrAwaited, runID)
	}
	c.waiters[runID] = p.ch
	return p, nil
}

// Close stops following finished runs; every Wait in progress returns
// ErrClosed.
func (c *Client) Close() {
	c.once.Do(func() {
		c.results.Stop()
		c.mu.Lock()
		close(c.closed)
		c.mu.Unlock()
	})
}

// Pending is a submitted run whose result is awaited.
type Pending struct {
	c  *Client
	id string
	ch chan orch.RunResult
	// duplicate: the stream held this run's request already.
	duplicate bool
}

// Duplicate reports whether the run had been requested already (within
// the stream's duplicate window): this submission stored nothing, and the
// run is the one requested first.
func (p *Pending) Duplicate() bool { return p.duplicate }

// RunID is the id of the run.
func (p *Pending) RunID() string { return p.id }

// Wait returns the run's result once its run.finished arrives (or, for a
// run that parks at a gate, its ParkedResult), or an error
// when ctx ends (the run goes on) or the client is closed.
func (p *Pending) Wait(ctx context.Context) (orch.RunResult, error) {
	select {
	case res := <-p.ch:
		return res, nil
	case <-ctx.Done():
		return orch.RunResult{}, fmt.Errorf("runclient: run %s: %w", p.id, ctx.Err())
	case <-p.c.closed:
		return orch.RunResult{}, fmt.Errorf("runclient: run %s: %w", p.id, ErrClosed)
	}
}

// Close stops awaiting the run. It may be called more than once.
func (p *Pending) Close() {
	p.c.mu.Lock()
	defer p.c.mu.Unlock()
	if p.c.waiters[p.id] == p.ch {
		delete(p.c.waiters, p.id)
	}
}
