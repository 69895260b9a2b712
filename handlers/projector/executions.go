package projector

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/cloudevents/sdk-go/v2/event"
	json "github.com/go-json-experiment/json/v1"

	"github.com/agentbus/agentbus/events"
	"github.com/agentbus/agentbus/handlers/runctl"
	"github.com/agentbus/agentbus/llm"
	"github.com/agentbus/agentbus/orch"
	"github.com/agentbus/agentbus/store"
)

// ExecutionStore keeps the runs' execution records.
type ExecutionStore interface {
	PutExecution(ctx context.Context, e store.Execution) error
	GetExecution(ctx context.Context, tenantID, id string) (store.Execution, error)
	ListExecutions(ctx context.Context, q store.ExecutionQuery) ([]store.Execution, error)
}

// runFinished is the part of a run.finished audit payload an execution
// record is made of (orch's decision.end and decision.execution write
// it).
type runFinished struct {
	RunID        string        `json:"run_id"`
	SessionID    string        `json:"session_id"`
	TerminalCode string        `json:"terminal_code"`
	Reason       string        `json:"reason"`
	Usage        llm.Usage     `json:"usage"`
	AgentID      string        `json:"agent_id"`
	UserID       string        `json:"user_id"`
	TriggerID    string        `json:"trigger_id"`
	Message      string        `json:"message"`
	Response     string        `json:"response"`
	StartedAt    time.Time     `json:"started_at"`
	LatencyMS    int64         `json:"latency_ms"`
	Tools        orch.ToolUses `json:"tools"`
	HandoffChain []string      `json:"handoff_chain"`
	// PayloadRecords says the run's tenant keeps payload records: the
	// record takes them from the run's trace (withPayloads).
	PayloadRecords bool `json:"payload_records"`
}

// executionRecord builds the execution record of a run from its
// run.finished audit event. The record's id is the run's and its time
// the event's, so a redelivered run.finished builds the same record.
// payloads says the run's tenant keeps payload records (the record then
// takes them from the run's trace). ok is false for a run.finished that
// names no run or no terminal code (nothing to record; the event is
// still indexed); a payload that is not a JSON object is a permanent
// error.
func executionRecord(ev event.Event) (e store.Execution, payloads, ok bool, err error) {
	var a events.Audit
	if err := events.Decode(ev, &a); err != nil {
		return e, false, false, err
	}
	var f runFinished
	if len(a.Payload) > 0 {
		if err := json.Unmarshal(a.Payload, &f); err != nil {
			return e, false, false, events.Permanent(fmt.Errorf("%w: run.finished payload: %v", events.ErrInvalidData, err))
		}
	}
	m := events.MetaOf(ev)
	runID := cmp.Or(f.RunID, m.Run)
	if runID == "" || f.TerminalCode == "" {
		return e, false, false, nil
	}
	e = store.Execution{
		ExecutionID: runID, TenantID: m.Tenant, SessionID: cmp.Or(f.SessionID, m.Session), AgentID: f.AgentID, TriggerID: f.TriggerID,
		UserID: cmp.Or(f.UserID, a.UserID), Input: runctl.Clip(f.Message, store.MaxExecutionText), Output: runctl.Clip(f.Response, store.MaxExecutionText),
		LatencyMS: max(f.LatencyMS, 0), TokensIn: max(f.Usage.InputTokens, 0), TokensOut: max(f.Usage.OutputTokens, 0),
		CostUSD: max(f.Usage.CostUSD, 0), Status: store.ExecutionStatus(f.TerminalCode), TerminalCode: f.TerminalCode,
		HandoffChain: f.HandoffChain, CreatedAt: ev.Time().UTC(),
	}
	if e.Status != store.ExecutionSuccess {
		e.ErrorCode, e.ErrorReason = f.TerminalCode, runctl.Clip(f.Reason, store.MaxExecutionText)
	}
	for name, u := range f.Tools {
		e.ToolCalls = append(e.ToolCalls, store.ToolCallCount{Name: name, Calls: max(u.Calls, 0), Errors: max(u.Errors, 0)})
	}
	slices.SortFunc(e.ToolCalls, func(x, y store.ToolCallCount) int { return strings.Compare(x.Name, y.Name) })
	return e, f.PayloadRecords, true, nil
}

// execution writes a run's execution record e, with the payload records
// of its trace when payloads is set (the run's events are written by
// then). Writing it again (a redelivery) replaces it with the same
// record.
func (p *Projector) execution(ctx context.Context, e store.Execution, payloads bool) error {
	ctx, cancel := context.WithTimeout(ctx, p.writeTimeout())
	defer cancel()
	if payloads {
		trace, err := p.Store.Trace(ctx, store.TraceQuery{TenantID: e.TenantID, PlanID: orch.PlanID(e.ExecutionID)})
		if err != nil {
			return fmt.Errorf("handlers: read the trace of execution record %s: %w", e.ExecutionID, err)
		}
		withPayloads(&e, trace)
	}
	err := p.Store.PutExecution(ctx, e)
	switch {
	case errors.As(err, new(*store.SchemaError)):
		return events.Permanent(err)
	case err != nil:
		return fmt.Errorf("handlers: write execution record: %w", err)
	}
	return nil
}

// withPayloads adds to e the payload records its run's trace keeps: each
// model.called event's request and answer and each skill.called event's
// arguments and result (those that carry them), in the trace's order,
// masked and clipped as the trace keeps them (llm.PayloadRecord, again:
// it changes nothing the trace kept), within
// store.MaxExecutionPayloadBytes; what does not fit is left out
// (PayloadsClipped).
func withPayloads(e *store.Execution, trace []store.Event) {
	room := store.MaxExecutionPayloadBytes
	fits := func(n int) bool {
		if n > room {
			e.PayloadsClipped = true
			return false
		}
		room -= n
		return true
	}
	for _, ev := range trace {
		var p struct {
			Task          string `json:"task"`
			PromptVersion string `json:"prompt_version"`
			Model         string `json:"model"`
			Request       string `json:"request"`
			Response      string `json:"response"`
			Error         string `json:"error"`
			Arguments     string `json:"arguments"`
			Result        string `json:"result"`
			IsError       bool   `json:"is_error"`
		}
		if (ev.EventType != "model.called" && ev.EventType != "skill.called") || json.Unmarshal(ev.Payload, &p) != nil {
			continue
		}
		switch {
		case ev.EventType == "model.called" && p.Task != "" && (p.Request != "" || p.Response != ""):
			r := store.ModelCallRecord{Task: p.Task, PromptVersion: p.PromptVersion, Model: p.Model, TaskID: ev.TaskID,
				Request: llm.PayloadRecord(p.Request), Response: llm.PayloadRecord(p.Response), Error: llm.PayloadRecord(p.Error), TS: ev.TS}
			if fits(r.Size()) {
				e.ModelCalls = append(e.ModelCalls, r)
			}
		case ev.EventType == "skill.called" && ev.SkillID != "" && (p.Arguments != "" || p.Result != ""):
			r := store.ToolResultRecord{Name: ev.SkillID, TaskID: ev.TaskID, Arguments: llm.PayloadRecord(p.Arguments),
				Result: llm.PayloadRecord(p.Result), IsError: p.IsError, TS: ev.TS}
			if fits(r.Size()) {
				e.ToolResults = append(e.ToolResults, r)
			}
		}
	}
}
