package orch

import (
	"fmt"
	"slices"
	"time"

	json "github.com/go-json-experiment/json/v1"
)

// Gates (seed 004). A gate parks a run until someone decides: an approval
// gate holds the tool calls a human must approve before they are made (a
// destructive skill always; network and delegated ones where a tenant's
// policy says so); an interrupt gate holds the run's next hop until it is
// resumed. While a gate is open nothing of the run is in flight: the run's
// state is kept with the gate (the router's gates bucket), and the gate's
// resolution (approved, rejected, expired, cancelled) is the run's next
// input. A gate's TTL is a scheduled resolution, delivered when it passes.
// An elicitation gate holds the calls whose MCP servers asked the user
// something: approving it answers them, and each call is made again with
// its answers.

// Gate kinds.
const (
	GateApproval    = "approval"
	GateInterrupt   = "interrupt"
	GateElicitation = "elicitation"
	// GateHuman is declared with the handoffs (handoff.go), GateClarify
	// with the questions (clarify.go), GateBudget with the budget's
	// release (release.go).
)

// Gate resolutions. A gate is GateOpen until one of the others.
const (
	GateOpen      = "open"
	GateApproved  = "approved"
	GateRejected  = "rejected"
	GateExpired   = "expired"
	GateCancelled = "cancelled"
)

// Plan and step states of a parked run, and the terminal plan states its
// gate may end it in.
const (
	PlanAwaitingGate = "awaiting_gate"
	PlanPaused       = "paused"
	PlanRejected     = "rejected"
	PlanExpired      = "expired"
	StepAwaitingGate = "awaiting_gate"
)

// OutcomeAwaitingGate: the step's model chose a call that needs an
// approval; the call was not made, and the step resumes with it once the
// run's gate is approved (StepResult.Parked holds what it resumes with).
const OutcomeAwaitingGate = "awaiting_gate"

// DefaultGateTTL is how long a gate waits for a decision when the run's
// pattern sets no gate_ttl_s. A gate never outlives its run's deadline.
const DefaultGateTTL = time.Hour

// PendingCall is a tool call held at a gate: the model chose it, and it is
// made only once approved, with the idempotency index N it would have had.
type PendingCall struct {
	ID        string          `json:"id"`
	Skill     string          `json:"skill"`
	Arguments json.RawMessage `json:"arguments"`
	ArgsHash  string          `json:"args_hash"`
	Mode      string          `json:"approval_mode"`
	N         int             `json:"n"`
	// Answers are the user's answers to what the call's server asked
	// (elicitation gates), in order: the call is made with them.
	Answers []ElicitAnswer `json:"answers,omitempty"`
}

// Elicitation is what a call's MCP server asked the user: the message,
// the JSON Schema of the answer, and the question's id (a hash of both).
type Elicitation struct {
	Message  string          `json:"message"`
	Schema   json.RawMessage `json:"requested_schema,omitempty"`
	Question string          `json:"question"`
}

// ElicitAnswer is the user's answer to one Elicitation.
type ElicitAnswer struct {
	Question string          `json:"question"`
	Content  json.RawMessage `json:"content"`
}

// Parked is what a step resumes from its gate with: the call it holds and
// the loop state of its turns (the turns include the assistant's call).
// Elicit, when set, is the question the call's server asked: the call was
// made, and is made again with the answer.
type Parked struct {
	Call      PendingCall    `json:"call"`
	Elicit    *Elicitation   `json:"elicit,omitempty"`
	Iteration int            `json:"iteration"`
	Turns     []Turn         `json:"turns,omitempty"`
	Repairs   int            `json:"repairs,omitempty"`
	Observed  int            `json:"observed,omitempty"`
	Calls     map[string]int `json:"calls,omitempty"`
	Denied    int            `json:"denied,omitempty"`
	Steered   int            `json:"steered,omitempty"`
	Tainted   string         `json:"tainted,omitempty"`
}

// GateAction is one action an approval gate holds: the step that wants
// it, the risk (its approval mode), the evidence for it (the skill's
// description and annotations) and the parked step.
type GateAction struct {
	Step     int             `json:"step"`
	TaskID   string          `json:"task_id"`
	Task     string          `json:"task"`
	Risk     string          `json:"risk"`
	Evidence json.RawMessage `json:"evidence,omitempty"`
	Resume   Parked          `json:"resume"`
}

// Gate is an open gate of a run.
type Gate struct {
	ID        string       `json:"id"`
	Kind      string       `json:"kind"`
	OpenedAt  time.Time    `json:"opened_at"`
	ExpiresAt time.Time    `json:"expires_at"`
	Actions   []GateAction `json:"actions,omitempty"`
	// By is who interrupted the run (an interrupt gate).
	By string `json:"by,omitempty"`
	// Replan is the failure whose replan an interrupt held.
	Replan *StepResult `json:"replan,omitempty"`
	// Handoff is the packet of a human gate: the run handed to a human.
	Handoff *HumanHandoff `json:"handoff,omitempty"`
	// Question is what a clarify gate asks the user.
	Question *Question `json:"question,omitempty"`
	// Budget is the ledger of a budget gate: why the run stopped and
	// what it resumes with once an extension is approved.
	Budget *BudgetStop `json:"budget,omitempty"`
}

// Packet is the gate as a human sees it to decide: each action with its
// parameters, risk and evidence, without the parked turns.
func (g Gate) Packet() GatePacket {
	p := GatePacket{Gate: g.ID, Kind: g.Kind, OpenedAt: g.OpenedAt, ExpiresAt: g.ExpiresAt, By: g.By, Handoff: g.Handoff,
		Question: g.Question, Budget: g.Budget}
	for _, a := range g.Actions {
		p.Actions = append(p.Actions, PacketAction{Step: a.Step, TaskID: a.TaskID, Task: a.Task, Action: a.Resume.Call.Skill,
			Parameters: a.Resume.Call.Arguments, ArgsHash: a.Resume.Call.ArgsHash, Risk: a.Risk, Evidence: a.Evidence,
			Elicitation: a.Resume.Elicit})
	}
	return p
}

// GatePacket is the approval packet of a gate (seed 004).
type GatePacket struct {
	Gate      string         `json:"gate_id"`
	Kind      string         `json:"kind"`
	OpenedAt  time.Time      `json:"opened_at"`
	ExpiresAt time.Time      `json:"expires_at"`
	Actions   []PacketAction `json:"actions,omitempty"`
	By        string         `json:"interrupted_by,omitempty"`
	Handoff   *HumanHandoff  `json:"handoff,omitempty"`
	// Question, at a clarify gate, is what the run asks: approving the
	// gate with content (or the session's next message) answers it.
	Question *Question `json:"question,omitempty"`
	// Budget, at a budget gate, is the run's ledger: approving the gate
	// with an extension (dimensions and amounts) lets the run go on.
	Budget *BudgetStop `json:"budget,omitempty"`
}

// PacketAction is one action of an approval packet.
type PacketAction struct {
	Step       int             `json:"step"`
	TaskID     string          `json:"task_id"`
	Task       string          `json:"task"`
	Action     string          `json:"action"`
	Parameters json.RawMessage `json:"parameters"`
	ArgsHash   string          `json:"args_hash"`
	Risk       string          `json:"risk"`
	Evidence   json.RawMessage `json:"evidence,omitempty"`
	// Elicitation is what the action's server asks the user: approving
	// the gate answers it, with content that satisfies its schema.
	Elicitation *Elicitation `json:"elicitation,omitempty"`
}

// Approval is a gate's resolution as the run records it: who decided
// what, and when.
type Approval struct {
	Gate     string    `json:"gate_id"`
	Kind     string    `json:"kind"`
	Decision string    `json:"decision"`
	By       string    `json:"by,omitempty"`
	Comment  string    `json:"comment,omitempty"`
	At       time.Time `json:"at"`
	// Actions are the calls it decided, as skill:args_hash; Steps the
	// steps that held them.
	Actions []string `json:"actions,omitempty"`
	Steps   []int    `json:"steps,omitempty"`
	// Answers are the answers an approved elicitation gate gave, by step.
	Answers map[int]json.RawMessage `json:"answers,omitempty"`
	// Answer is a clarify gate's answer; Extension what an approved
	// budget gate added to the run's limits.
	Answer    string `json:"answer,omitempty"`
	Extension Vector `json:"extension,omitempty"`
}

// Approved is the approval a resumed step carries: the gate, who approved
// it and when, and the call it approved. The executor makes that call
// only if the gate's record says so too.
type Approved struct {
	Gate string      `json:"gate_id"`
	By   string      `json:"by,omitempty"`
	At   time.Time   `json:"at"`
	Call PendingCall `json:"call"`
}

// ApprovalDecided is the data of approval.decided: a gate's resolution.
// The ingress publishes it for a decision of POST
// /agent/runs/{run_id}/approvals/{gate_id} (after recording it in the
// gate's record), and the decider schedules one with GateExpired for the
// gate's TTL.
type ApprovalDecided struct {
	RunID     string    `json:"run_id"`
	TenantID  string    `json:"tenant_id"`
	SessionID string    `json:"session_id"`
	Gate      string    `json:"gate_id"`
	Decision  string    `json:"decision"`
	By        string    `json:"by,omitempty"`
	Comment   string    `json:"comment,omitempty"`
	At        time.Time `json:"at,omitzero"`
	// Answers approve an elicitation gate: each asking step's answer, a
	// JSON object its question's schema accepts.
	Answers map[int]json.RawMessage `json:"answers,omitempty"`
	// EndSession, with a human's reply to a human gate (Comment), ends
	// the session too.
	EndSession bool `json:"end_session,omitempty"`
	// Answer approves a clarify gate: the user's answer to its question.
	// AnswerRun, when the answer was the session's next message, is the
	// id that message's run request had.
	Answer    string `json:"answer,omitempty"`
	AnswerRun string `json:"answer_run_id,omitempty"`
	// Extension approves a budget gate: the amounts added to the run's
	// limits, per dimension (within its tenant's caps).
	Extension Vector `json:"extension,omitempty"`
}

// Validate checks what routing needs and the decision.
func (a ApprovalDecided) Validate() error {
	for _, f := range []struct{ name, v string }{{"run_id", a.RunID}, {"tenant_id", a.TenantID}, {"session_id", a.SessionID}, {"gate_id", a.Gate}} {
		if err := ValidateID(f.name, f.v); err != nil {
			return err
		}
	}
	if !slices.Contains([]string{GateApproved, GateRejected, GateExpired, GateCancelled}, a.Decision) {
		return fmt.Errorf("decision must be approved, rejected, expired or cancelled, not %q", a.Decision)
	}
	return nil
}

// RunParked is the data of run.parked: the run waits at a gate. The
// ingress answers a caller waiting for the run with it.
type RunParked struct {
	RunID     string     `json:"run_id"`
	TenantID  string     `json:"tenant_id"`
	SessionID string     `json:"session_id"`
	PlanID    string     `json:"plan_id"`
	Status    string     `json:"status"`
	Gate      GatePacket `json:"gate"`
	// Answered are the run requests whose messages answered the run's
	// questions: their callers wait for this run.
	Answered []string `json:"answered_by_runs,omitempty"`
}

// GateResolved: the run's open gate was resolved (an ApprovalDecided, as
// its gate's record holds it).
type GateResolved struct {
	Gate     string
	Decision string
	By       string
	Comment  string
	At       time.Time
	Answers  map[int]json.RawMessage
	// EndSession: the human who replied to a human gate ended the
	// session.
	EndSession bool
	// Answer and AnswerRun answer a clarify gate; Extension approves a
	// budget gate (ApprovalDecided).
	Answer    string
	AnswerRun string
	Extension Vector
	// Rerouted is the routing model's answer to the task with its
	// clarification, for a clarify gate that asked about the intent: the
	// router routes the run again before the decider resumes it.
	Rerouted *Requested
}

// Interrupted wraps the input of a run that was asked to pause (POST
// /agent/runs/{run_id}/interrupt): the input is recorded as usual, but
// the hop it would start (the next steps, a replan, the answer) is held
// at an interrupt gate until the run is resumed. ID identifies the
// interrupt, so each parks the run once.
type Interrupted struct {
	Input Input
	ID    string
	By    string
	At    time.Time
}

func (i GateResolved) at() time.Time { return i.At }
func (i Interrupted) at() time.Time  { return i.At }

// gateExpiry is when a gate opened now expires: after the pattern's
// gate_ttl_s (else DefaultGateTTL), never past the run's deadline.
func (d *decision) gateExpiry(g Gate) time.Time {
	ttl := DefaultGateTTL
	if s := d.State.PatternDef.GateTTLS; s > 0 {
		ttl = time.Duration(s) * time.Second
	}
	if r := d.State.Budget.Release; g.Kind == GateBudget && r != nil && r.GateTTLS > 0 {
		ttl = time.Duration(r.GateTTLS) * time.Second
	}
	at := d.at.Add(ttl)
	if dl := d.State.Deadline; !dl.IsZero() && dl.Before(at) {
		at = dl
	}
	return at
}

// openGate parks the run at a new gate: nothing is dispatched, the state
// waits with the gate, the gate's TTL is scheduled and a caller waiting
// for the run is told (run.parked).
func (d *decision) openGate(g Gate) {
	req := d.State.Request
	g.ID = "gate-" + deriveID(req.RunID, fmt.Sprintf("gate/%d", d.State.Seq))[:13]
	g.OpenedAt, g.ExpiresAt = d.at, d.gateExpiry(g)
	d.State.Gate = &g
	d.State.Plan.Status = PlanAwaitingGate
	if g.Kind == GateInterrupt {
		d.State.Plan.Status = PlanPaused
	}
	packet := g.Packet()
	d.audit("gate.opened", "", packet)
	d.Emits = append(d.Emits,
		Emit{Key: "expiry/" + g.ID, At: g.ExpiresAt, RunScope: req.RunID, Data: ApprovalDecided{RunID: req.RunID,
			TenantID: req.TenantID, SessionID: req.SessionID, Gate: g.ID, Decision: GateExpired, At: g.ExpiresAt}},
		Emit{Key: "parked/" + g.ID, RunScope: req.RunID, Data: RunParked{RunID: req.RunID, TenantID: req.TenantID,
			SessionID: req.SessionID, PlanID: d.State.Plan.PlanID, Status: d.State.Plan.Status, Gate: packet,
			Answered: d.State.Answered()}})
	d.Opened = &g
}

// parkSteps opens a gate for the steps that stopped at one: an
// elicitation gate when every one of them waits for a user's answer, an
// approval gate otherwise.
func (d *decision) parkSteps(parked []StepResult) {
	g := Gate{Kind: GateElicitation}
	for _, r := range parked {
		if r.Parked.Elicit == nil {
			g.Kind = GateApproval
		}
	}
	for _, r := range parked {
		s := d.State.Plan.Live(r.Step)
		g.Actions = append(g.Actions, GateAction{Step: r.Step, TaskID: r.TaskID, Task: s.Task, Risk: r.Parked.Call.Mode,
			Evidence: r.Evidence, Resume: *r.Parked})
	}
	d.openGate(g)
}

// hold parks the run at an interrupt gate instead of its next hop, if the
// input that arrived was interrupted: f, when set, is the failure whose
// replan is held. It reports whether it did.
func (d *decision) hold(f *StepResult) bool {
	in := d.interrupt
	if in == nil {
		return false
	}
	d.interrupt = nil
	d.State.Interrupt = in.ID
	d.audit("run.interrupted", "", map[string]any{"interrupt_id": in.ID, "by": in.By})
	d.openGate(Gate{Kind: GateInterrupt, By: in.By, Replan: f})
	return true
}

// resolved takes a gate's resolution: approved, the held work goes on
// (the parked steps make their approved calls; an interrupted run takes
// its held hop; a question's answer or a budget's extension resumes the
// run); rejected, expired or cancelled, the run ends.
func (d *decision) resolved(in GateResolved) {
	g := d.State.Gate
	if g == nil || g.ID != in.Gate {
		// A resolution of a gate the run no longer has: applied already.
		d.audit("gate.stale", "", map[string]any{"gate_id": in.Gate, "decision": in.Decision})
		return
	}
	d.State.Gate = nil
	d.State.Seq++
	if g.Kind == GateHuman {
		// However it closes, the session is no longer waiting for a
		// human, and the run is no agent turn.
		d.sessionStatus = SessionActive
	}
	rec := Approval{Gate: g.ID, Kind: g.Kind, Decision: in.Decision, By: in.By, Comment: in.Comment, At: in.At.UTC(),
		Answers: in.Answers}
	if in.Decision == GateApproved {
		rec.Answer = in.Answer
		if g.Kind == GateBudget {
			rec.Extension, _ = d.State.Budget.Extend(in.Extension)
		}
	}
	for _, a := range g.Actions {
		if a.Resume.Call.Skill != "" {
			rec.Actions = append(rec.Actions, a.Resume.Call.Skill+":"+a.Resume.Call.ArgsHash)
		}
		rec.Steps = append(rec.Steps, a.Step)
	}
	d.State.Approvals = append(slices.Clone(d.State.Approvals), rec)
	d.audit("gate."+in.Decision, "", rec)
	detail := map[string]any{"gate": g.Packet(), "decision": rec}
	who := ""
	if in.By != "" {
		who = " by " + in.By
	}
	switch in.Decision {
	case GateApproved:
		d.State.Plan.Status = PlanExecuting
		switch {
		case g.Kind == GateHuman:
			d.replied(in, detail)
		case g.Kind == GateClarify:
			d.clarified(*g, in)
		case g.Kind == GateBudget:
			d.released(*g, rec)
		case g.Kind == GateInterrupt && g.Replan != nil:
			d.replan(*g.Replan)
		case g.Kind == GateInterrupt:
			d.dispatch()
		default:
			d.resume(*g, rec)
		}
	case GateCancelled:
		d.failParked(g, "cancelled"+who)
		d.cancel("cancelled"+who, detail)
	case GateRejected:
		d.rejected(g, in, who, detail)
	case GateExpired:
		reason := fmt.Sprintf("no decision on gate %s before it expired at %s", g.ID, g.ExpiresAt.UTC().Format(time.RFC3339))
		d.failParked(g, reason)
		code := CodeConfirmRequired
		switch g.Kind {
		case GateInterrupt:
			code = CodeTimeout
		case GateHuman:
			code, reason = CodeReviewRequired, "no human replied to the handoff before it expired at "+g.ExpiresAt.UTC().Format(time.RFC3339)
		case GateClarify, GateBudget:
			d.unresolved(g, reason, detail)
			return
		}
		d.finishAs(PlanExpired, code, reason, detail)
	}
}

// rejected ends a run whose gate was denied: USER_CANCEL, except a
// question the user would not answer or an extension an operator refused,
// which end the run as it would have ended without the gate.
func (d *decision) rejected(g *Gate, in GateResolved, who string, detail map[string]any) {
	reason := "the action was not approved" + who
	switch g.Kind {
	case GateInterrupt:
		reason = "the interrupted run was not resumed" + who
	case GateElicitation:
		reason = "the tool's question was not answered" + who
	case GateClarify:
		reason = "the question was declined" + who
	case GateBudget:
		reason = "the budget extension was denied" + who
	}
	if in.Comment != "" {
		reason += ": " + in.Comment
	}
	d.failParked(g, reason)
	if g.Kind == GateClarify || g.Kind == GateBudget {
		d.State.Plan.Status = PlanRejected
		d.unresolved(g, reason, detail)
		return
	}
	d.State.Plan.Status = PlanRejected
	d.end(CodeUserCancel, "The task was stopped: "+reason, reason, detail)
}

// unresolved ends a run whose clarify or budget gate closed without an
// answer or an extension (denied, or expired): with the code it would
// have ended with had it not parked, its reason, and the evidence it
// parked with besides the gate and its decision.
func (d *decision) unresolved(g *Gate, why string, detail map[string]any) {
	code, reason, evidence := CodeBudgetExhausted, "", json.RawMessage(nil)
	if q := g.Question; q != nil {
		code, reason, evidence = q.Code, q.Reason, q.Detail
	}
	if b := g.Budget; b != nil {
		reason, evidence = b.Reason, b.Evidence
	}
	var orig map[string]any
	if json.Unmarshal(evidence, &orig) == nil {
		for k, v := range orig {
			if _, taken := detail[k]; !taken {
				detail[k] = v
			}
		}
	}
	status := PlanExpired
	if d.State.Plan.Status == PlanRejected {
		status = PlanRejected
	}
	d.finishAs(status, code, reason+" ("+why+")", detail)
}

// failParked fails the steps a closed gate held.
func (d *decision) failParked(g *Gate, reason string) {
	for _, a := range g.Actions {
		if s := d.State.Plan.Live(a.Step); s != nil && s.Status == StepAwaitingGate {
			s.Status, s.FailureReason = StepFailed, reason
		}
	}
}

// resume dispatches the parked steps of an approved gate as one group:
// each resumes where it stopped, with the approval of its held call. The
// messages' ids derive from the run and the gate, whichever input
// resolved it.
func (d *decision) resume(g Gate, rec Approval) {
	plan := &d.State.Plan
	runID := d.State.Request.RunID
	group := Group{ID: "grp-" + deriveID(runID, fmt.Sprintf("group/%d", d.State.Seq)), Expected: len(g.Actions)}
	for _, a := range g.Actions {
		if s := plan.Live(a.Step); s != nil {
			s.Status = StepRunning
		}
	}
	for _, a := range g.Actions {
		s := plan.Live(a.Step)
		if s == nil {
			continue
		}
		p := a.Resume
		if p.Elicit != nil {
			p.Call.Answers = append(slices.Clone(p.Call.Answers), ElicitAnswer{Question: p.Elicit.Question, Content: rec.Answers[a.Step]})
		}
		d.audit(fmt.Sprintf("step_%d.resumed", s.Index), s.TaskID, map[string]any{"gate_id": g.ID, "by": rec.By,
			"action": p.Call.Skill, "args_hash": p.Call.ArgsHash, "group": group.ID})
		var approved *Approved
		if p.Call.Skill != "" {
			// A step stopped by its budget holds no call: it takes its
			// turn again.
			approved = &Approved{Gate: g.ID, By: rec.By, At: rec.At, Call: p.Call}
		}
		d.Emits = append(d.Emits, Emit{Key: fmt.Sprintf("resume/%s/%d", g.ID, s.Index), RunScope: runID, Data: StepRequest{
			Run: d.State, Step: s.Index, Group: group, Inputs: plan.inputKeys(*s), Iteration: p.Iteration, Turns: p.Turns,
			Repairs: p.Repairs, Observed: p.Observed, Calls: p.Calls, Denied: p.Denied, Steered: p.Steered,
			Tainted: p.Tainted, Approved: approved}})
	}
	if group.Expected > 1 {
		d.groupDeadline(group)
	}
}
