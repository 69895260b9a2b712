package runctl

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	json "github.com/go-json-experiment/json/v1"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/agentbus/agentbus/kvcas"
	"github.com/agentbus/agentbus/orch"
	"github.com/agentbus/agentbus/schema"
	"github.com/agentbus/agentbus/skills"
)

// BucketGates holds the runs parked at a gate, keyed
// <tenant>.<run_id>.<gate_id> (see Gates), as long as the runs' events
// are kept.
const BucketGates = "gates"

// GateRecord is a gate as the gates bucket keeps it: the gate, the run's
// state while it waits, and its resolution once someone decided. It is
// the approval record: the executor makes a held call only if its gate's
// record says approved.
type GateRecord struct {
	Gate  orch.Gate  `json:"gate"`
	State orch.State `json:"state"`
	// Status is orch.GateOpen until the gate is resolved.
	Status    string    `json:"status"`
	By        string    `json:"by,omitempty"`
	Comment   string    `json:"comment,omitempty"`
	DecidedAt time.Time `json:"decided_at,omitzero"`
	// Answers are an approved elicitation gate's answers, by step: each
	// its question's content, with the schema's defaults filled in.
	Answers map[int]json.RawMessage `json:"answers,omitempty"`
	// EndSession: the human who replied to a human gate ended the
	// session.
	EndSession bool `json:"end_session,omitempty"`
	// Answer is an approved clarify gate's answer, AnswerRun the run
	// request whose message it was (the session's next message);
	// Extension what an approved budget gate adds to the run's limits.
	Answer    string      `json:"answer,omitempty"`
	AnswerRun string      `json:"answer_run_id,omitempty"`
	Extension orch.Vector `json:"extension,omitempty"`
	// Applied is the id of the input whose router hop took the
	// resolution to the run: no other input applies it again.
	Applied string `json:"applied,omitempty"`
}

// View is the record as the API shows it: the packet and its resolution,
// without the run's state.
func (r GateRecord) View() GateView {
	return GateView{RunID: r.State.Request.RunID, GatePacket: r.Gate.Packet(), Status: r.Status, By: r.By,
		Comment: r.Comment, DecidedAt: r.DecidedAt, Answers: r.Answers, Answer: r.Answer, AnswerRun: r.AnswerRun,
		Extension: r.Extension}
}

// Resolved is the decider's input of the record's resolution.
func (r GateRecord) Resolved() orch.GateResolved {
	return orch.GateResolved{Gate: r.Gate.ID, Decision: r.Status, By: r.By, Comment: r.Comment, At: r.DecidedAt,
		Answers: r.Answers, EndSession: r.EndSession, Answer: r.Answer, AnswerRun: r.AnswerRun, Extension: r.Extension}
}

// GateView is a gate as GET /agent/runs/{run_id}/approvals lists it.
type GateView struct {
	RunID string `json:"run_id"`
	orch.GatePacket
	Status    string                  `json:"status"`
	By        string                  `json:"decided_by,omitempty"`
	Comment   string                  `json:"comment,omitempty"`
	DecidedAt time.Time               `json:"decided_at,omitzero"`
	Answers   map[int]json.RawMessage `json:"answers,omitempty"`
	Answer    string                  `json:"answer,omitempty"`
	AnswerRun string                  `json:"answer_run_id,omitempty"`
	Extension orch.Vector             `json:"extension,omitempty"`
}

// Gate errors.
var (
	// ErrGateNotFound: the run has no such gate (or is another tenant's).
	ErrGateNotFound = errors.New("handlers: gate not found")
	// ErrGateDecided: the gate was already resolved otherwise.
	ErrGateDecided = errors.New("handlers: gate already decided")
	// ErrNotApproved: a held call's gate record does not approve it.
	ErrNotApproved = errors.New("handlers: the call has no approval record")
	// ErrInvalidAnswer: an elicitation gate's approval lacks an answer,
	// or one its question's schema rejects; a clarify gate's approval
	// lacks its answer.
	ErrInvalidAnswer = errors.New("handlers: invalid answer")
	// ErrInvalidExtension: a budget gate's approval names no extension
	// the tenant's caps let through (orch.ValidateExtension).
	ErrInvalidExtension = errors.New("handlers: invalid extension")
)

// MaxAnswerBytes bounds a clarify gate's answer: a run request's message may be one.
const MaxAnswerBytes = 32 << 10

// Gates are the runs parked at gates. The router opens a gate (Open) when
// the decider parks a run, and applies its resolution (Apply) when the
// approval.decided input arrives; the ingress (or, with the rights, any
// NATS client) resolves it (Resolve); the executor checks a resumed
// call's approval against it (CheckApproved). Every change is a
// compare-and-swap, so the first resolution wins and is applied once.
type Gates struct{ KV jetstream.KeyValue }

func gateKey(tenant, runID, gate string) string { return tenant + "." + runID + "." + gate }

// Open stores a new gate with the parked run's state. Storing it again (a
// redelivered hop) keeps the first record.
func (g *Gates) Open(ctx context.Context, state orch.State, gate orch.Gate) error {
	if g == nil {
		return errors.New("handlers: the run parks at a gate, but no gates bucket is configured")
	}
	b, err := json.Marshal(GateRecord{Gate: gate, State: state, Status: orch.GateOpen})
	if err != nil {
		return err
	}
	_, err = g.KV.Create(ctx, gateKey(state.Request.TenantID, state.Request.RunID, gate.ID), b)
	if err != nil && !errors.Is(err, jetstream.ErrKeyExists) {
		return fmt.Errorf("handlers: open gate %s: %w", gate.ID, err)
	}
	return nil
}

// Get returns a gate's record and its revision.
func (g *Gates) Get(ctx context.Context, tenant, runID, gate string) (GateRecord, uint64, error) {
	if orch.ValidateID("run_id", runID) != nil || orch.ValidateID("gate_id", gate) != nil {
		return GateRecord{}, 0, ErrGateNotFound
	}
	e, err := g.KV.Get(ctx, gateKey(tenant, runID, gate))
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return GateRecord{}, 0, ErrGateNotFound
	}
	if err != nil {
		return GateRecord{}, 0, fmt.Errorf("handlers: read gate %s: %w", gate, err)
	}
	var rec GateRecord
	if err := json.Unmarshal(e.Value(), &rec); err != nil {
		return GateRecord{}, 0, fmt.Errorf("handlers: gate %s: %w", gate, err)
	}
	return rec, e.Revision(), nil
}

// List returns the gates of a run, oldest first.
func (g *Gates) List(ctx context.Context, tenant, runID string) ([]GateRecord, error) {
	if orch.ValidateID("run_id", runID) != nil {
		return nil, nil
	}
	lister, err := g.KV.ListKeysFiltered(ctx, gateKey(tenant, runID, "*"))
	if err != nil {
		return nil, fmt.Errorf("handlers: list gates: %w", err)
	}
	var out []GateRecord
	for key := range lister.Keys() {
		rec, _, err := g.Get(ctx, tenant, runID, key[strings.LastIndexByte(key, '.')+1:])
		if errors.Is(err, ErrGateNotFound) {
			continue
		}
		if err != nil {
			return nil, err
		}
		out = append(out, rec)
	}
	slices.SortFunc(out, func(a, b GateRecord) int { return a.Gate.OpenedAt.Compare(b.Gate.OpenedAt) })
	return out, nil
}

// Resolve records the decision of an open gate, first come first served.
// Deciding again what was decided is not an error (a retried request);
// deciding otherwise is ErrGateDecided. It returns the record as stored,
// and its revision.
func (g *Gates) Resolve(ctx context.Context, tenant string, a orch.ApprovalDecided) (GateRecord, uint64, error) {
	if orch.ValidateID("run_id", a.RunID) != nil || orch.ValidateID("gate_id", a.Gate) != nil {
		return GateRecord{}, 0, ErrGateNotFound
	}
	e, err := kvcas.Update(ctx, g.KV, gateKey(tenant, a.RunID, a.Gate), func(rec *GateRecord, rev uint64) (bool, error) {
		if rev == 0 {
			return false, ErrGateNotFound
		}
		if rec.Status != orch.GateOpen {
			if rec.Status != a.Decision {
				return false, fmt.Errorf("%w: %s", ErrGateDecided, rec.Status)
			}
			return false, nil
		}
		if a.Decision == orch.GateApproved {
			if err := approvable(rec, &a); err != nil {
				return false, err
			}
		}
		rec.Status, rec.By, rec.Comment, rec.DecidedAt = a.Decision, a.By, a.Comment, a.At.UTC()
		rec.EndSession = a.EndSession && rec.Gate.Kind == orch.GateHuman
		if a.Decision == orch.GateApproved {
			rec.Answer, rec.AnswerRun, rec.Extension = a.Answer, a.AnswerRun, a.Extension
		}
		if rec.DecidedAt.IsZero() {
			rec.DecidedAt = time.Now().UTC()
		}
		return true, nil
	})
	if errors.Is(err, kvcas.ErrCorrupt) {
		err = fmt.Errorf("handlers: gate %s: %w", a.Gate, err)
	}
	return e.Value, e.Revision, err
}

// approvable checks what approving the gate of rec takes: an elicitation
// gate's answers (filled from their schemas' defaults), a human gate's
// reply, a clarify gate's answer, a budget gate's extension.
func approvable(rec *GateRecord, a *orch.ApprovalDecided) error {
	answers, err := elicitAnswers(rec.Gate, a.Answers)
	if err != nil {
		return err
	}
	rec.Answers = answers
	switch rec.Gate.Kind {
	case orch.GateHuman:
		if strings.TrimSpace(a.Comment) == "" {
			// The reply is the run's answer: a human gate is approved
			// only by one (POST /agent/sessions/{session_id}/reply).
			return fmt.Errorf("%w: a human handoff is answered by a reply message", ErrInvalidAnswer)
		}
	case orch.GateClarify:
		a.Answer = strings.TrimSpace(a.Answer)
		switch {
		case a.Answer == "":
			return fmt.Errorf("%w: the run asks %q; answer it (content)", ErrInvalidAnswer, rec.Gate.Question.Text)
		case len(a.Answer) > MaxAnswerBytes:
			return fmt.Errorf("%w: the answer is longer than %d bytes", ErrInvalidAnswer, MaxAnswerBytes)
		}
	case orch.GateBudget:
		if err := orch.ValidateExtension(rec.State.Budget, a.Extension); err != nil {
			return fmt.Errorf("%w: %v", ErrInvalidExtension, err)
		}
	}
	if rec.Gate.Kind != orch.GateClarify {
		a.Answer, a.AnswerRun = "", ""
	}
	if rec.Gate.Kind != orch.GateBudget {
		a.Extension = nil
	}
	return nil
}

// Apply claims the application of a resolved gate for the input inputID:
// it reports false when another input applied it already (the gate's
// resolution reached the run through it).
func (g *Gates) Apply(ctx context.Context, rec GateRecord, rev uint64, inputID string) (bool, error) {
	switch rec.Applied {
	case inputID:
		return true, nil // a redelivery of the input that applied it
	case "":
	default:
		return false, nil
	}
	rec.Applied = inputID
	_, err := g.update(ctx, rec, rev)
	if kvcas.IsConflict(err) {
		cur, _, err := g.Get(ctx, rec.State.Request.TenantID, rec.State.Request.RunID, rec.Gate.ID)
		return err == nil && cur.Applied == inputID, err
	}
	return err == nil, err
}

func (g *Gates) update(ctx context.Context, rec GateRecord, rev uint64) (uint64, error) {
	b, err := json.Marshal(rec)
	if err != nil {
		return 0, err
	}
	return g.KV.Update(ctx, gateKey(rec.State.Request.TenantID, rec.State.Request.RunID, rec.Gate.ID), b, rev)
}

// CheckApproved reports whether the gates bucket approves the held call a
// resumed step carries: its gate approved, and the call (skill and
// argument hash) one of the gate's actions. A step message that claims an
// approval its record does not hold is refused (ErrNotApproved).
func (g *Gates) CheckApproved(ctx context.Context, tenant, runID string, step int, a orch.Approved) error {
	if g == nil {
		return fmt.Errorf("%w: no gates bucket is configured", ErrNotApproved)
	}
	rec, _, err := g.Get(ctx, tenant, runID, a.Gate)
	if errors.Is(err, ErrGateNotFound) {
		return fmt.Errorf("%w: gate %s does not exist", ErrNotApproved, a.Gate)
	}
	if err != nil {
		return err
	}
	if rec.Status != orch.GateApproved {
		return fmt.Errorf("%w: gate %s is %s", ErrNotApproved, a.Gate, rec.Status)
	}
	for _, act := range rec.Gate.Actions {
		if act.Step == step && act.Resume.Call.Skill == a.Call.Skill && act.Resume.Call.ArgsHash == a.Call.ArgsHash &&
			act.Resume.Call.N == a.Call.N {
			if !slices.EqualFunc(recordedAnswers(rec, act), a.Call.Answers, sameAnswer) {
				return fmt.Errorf("%w: gate %s did not give %s these answers", ErrNotApproved, a.Gate, a.Call.Skill)
			}
			return nil
		}
	}
	return fmt.Errorf("%w: gate %s does not hold %s with these arguments", ErrNotApproved, a.Gate, a.Call.Skill)
}

// Open gate of a run, if any: the newest record still open.
func (g *Gates) OpenOf(ctx context.Context, tenant, runID, kind string) (GateRecord, bool, error) {
	recs, err := g.List(ctx, tenant, runID)
	if err != nil {
		return GateRecord{}, false, err
	}
	for i := len(recs) - 1; i >= 0; i-- {
		if recs[i].Status == orch.GateOpen && (kind == "" || recs[i].Gate.Kind == kind) {
			return recs[i], true, nil
		}
	}
	return GateRecord{}, false, nil
}

// recordedAnswers are the answers an approved gate's action is made with:
// those it held, and the gate's answer to its question.
func recordedAnswers(rec GateRecord, act orch.GateAction) []orch.ElicitAnswer {
	out := slices.Clone(act.Resume.Call.Answers)
	if q := act.Resume.Elicit; q != nil {
		out = append(out, orch.ElicitAnswer{Question: q.Question, Content: rec.Answers[act.Step]})
	}
	return out
}

func sameAnswer(a, b orch.ElicitAnswer) bool {
	return a.Question == b.Question && sameJSON(a.Content, b.Content)
}

// sameJSON reports whether a and b are the same JSON text, ignoring
// insignificant space.
func sameJSON(a, b json.RawMessage) bool {
	var ca, cb bytes.Buffer
	return json.Compact(&ca, a) == nil && json.Compact(&cb, b) == nil && bytes.Equal(ca.Bytes(), cb.Bytes())
}

// elicitAnswers checks the answers approving gate: every elicitation
// action has one, a JSON object its question's schema accepts once the
// schema's defaults fill the properties it leaves out (SEP-1034). It
// returns them with the defaults, by step; no answers for a gate that
// asks nothing.
func elicitAnswers(g orch.Gate, given map[int]json.RawMessage) (map[int]json.RawMessage, error) {
	var out map[int]json.RawMessage
	for _, act := range g.Actions {
		q := act.Resume.Elicit
		if q == nil {
			continue
		}
		content, ok := given[act.Step]
		if !ok {
			return nil, fmt.Errorf("%w: step %d asks %q; answer it (content)", ErrInvalidAnswer, act.Step, q.Message)
		}
		filled, err := skills.WithDefaults(q.Schema, content)
		if err != nil {
			return nil, fmt.Errorf("%w: step %d: %v", ErrInvalidAnswer, act.Step, err)
		}
		if len(q.Schema) > 0 {
			if err := schema.Validate(q.Schema, filled); err != nil {
				return nil, fmt.Errorf("%w: step %d: %v", ErrInvalidAnswer, act.Step, err)
			}
		}
		if out == nil {
			out = map[int]json.RawMessage{}
		}
		out[act.Step] = filled
	}
	for step := range given {
		if out[step] == nil {
			return nil, fmt.Errorf("%w: gate %s asks nothing of step %d", ErrInvalidAnswer, g.ID, step)
		}
	}
	return out, nil
}
