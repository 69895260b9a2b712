package orch

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"time"

	json "github.com/go-json-experiment/json/v1"

	"github.com/agentbus/agentbus/domain"
)

// MaxReplans bounds replanning per run (seed 000 §3) when the run's
// pattern sets no max_replans of its own.
const MaxReplans = 3

// maxReplans is the run's replan limit, as recorded in its state.
func (s State) maxReplans() int {
	if n := s.PatternDef.MaxReplans; n > 0 {
		return n
	}
	return MaxReplans
}

// MinConfidence is the run's confidence threshold, as recorded in its
// state.
func (s RunState) MinConfidence() float64 {
	if c := s.PatternDef.MinConfidence; c > 0 {
		return c
	}
	return DefaultMinConfidence
}

// Input is one thing that happened to a run. Each carries its own time: the
// decider reads no clock.
type Input interface{ at() time.Time }

// Failure says why a model call ended a run: the terminal code and reason,
// and the structured evidence of a guard (a refused budget draw).
type Failure struct {
	Code     string
	Reason   string
	Evidence json.RawMessage
}

// Requested: a run was requested, and the routing model answered (or
// failed). TaskTypes are the configured options the route must stay in;
// Calls are the routing model's calls, for the trace and the usage totals.
type Requested struct {
	Request   RunRequest
	Context   RunContext
	Route     domain.Route
	TaskTypes []domain.TaskType
	// Patterns are the configured pattern definitions; the chosen one is
	// recorded in the run's state.
	Patterns []domain.Pattern
	// Policy is the configured budget policy: the run's limits are
	// resolved from it and recorded in its state.
	Policy BudgetPolicy
	// Agent is the definition of the agent the request names, loaded by
	// the router; AgentError says why it could not be (not defined for
	// the tenant, inactive). A run that names an agent it does not have
	// ends VALIDATION_FAIL before any model call.
	Agent      *AgentDef
	AgentError string
	// Session is the run's session as the router found it (nil: a new
	// session): a run in a session with a current agent acts as it
	// (Agent is then that agent's definition) with its handoff chain, and
	// a handed-off or completed session refuses the run
	// (SessionAgent).
	Session *SessionState
	// SessionTurns counts the agent turns the run's session has had: a
	// run whose agent's max_turns they reach takes its handoff_behavior
	// instead of a turn.
	SessionTurns int
	// AgentRoute is a router agent's classification of the message:
	// the sub-agent the run goes on as (agent_route.go).
	AgentRoute *AgentRoute
	// RecallError says why the router recalled no memory (the store or
	// the embedder failed): the run goes on without, and the trace says
	// so. The memories it recalled are in Context.
	RecallError string
	// QuotaLease is what the router took of the run's token quotas
	// before its first model call (nil: no quota applies).
	QuotaLease *QuotaLease
	Calls      []domain.Call
	Failure    *Failure
	At         time.Time
}

// Planned: the planner proposed steps, a revision or an infeasibility.
type Planned struct {
	Proposal PlanProposal // its Run is ignored: the state is Decide's argument
	At       time.Time
}

// Joined: every member of a dispatched group finished, or its deadline
// passed (Partial) and Results hold the members that finished. Group is
// the joined group (zero for inputs that predate it).
type Joined struct {
	Group   Group
	Results []StepResult
	Partial bool
	// Target is the agent a member's handoff names, loaded by the
	// router; TargetError says why it could not be.
	Target      *AgentDef
	TargetError string
	At          time.Time
}

// DefaultGroupTimeout is a fan-out group's deadline when the pattern sets
// none. It stays under the streams' duplicate window (15 minutes), within
// which a group's join id is kept once.
const DefaultGroupTimeout = 10 * time.Minute

// DefaultRunTimeout is a run's wall-clock limit when the pattern sets
// none.
const DefaultRunTimeout = 30 * time.Minute

// Synthesised: the synthesiser answered a Synthesise request (or failed).
type Synthesised struct {
	Answer  string
	Calls   []domain.Call
	Failure *Failure
	At      time.Time
}

// DeadLettered: a message of the run was dead-lettered. Carried is the run
// state the message carried, if any; FromRequest says the message was the
// run's request; Exhausted says it was removed after its deliveries ran out
// on transient errors rather than for being invalid.
type DeadLettered struct {
	RunID, TenantID, SessionID string
	Carried                    *State
	FromRequest                bool
	Exhausted                  bool
	Reason                     string
	At                         time.Time
}

func (i Requested) at() time.Time    { return i.At }
func (i Planned) at() time.Time      { return i.At }
func (i Joined) at() time.Time       { return i.At }
func (i Synthesised) at() time.Time  { return i.At }
func (i DeadLettered) at() time.Time { return i.At }
func (i Cancelled) at() time.Time    { return i.At }

// State is the run state the decider folds inputs into.
type State = RunState

// Emit is one orchestration message the decision sends: Key makes its id
// unique among the outputs of one input; Data is a PlanRequest,
// StepRequest or RunResult.
type Emit struct {
	Key  string
	Data any
	// RunScope, when set, is the run id the message's id derives from
	// (with Key) instead of the input's id, so the stream keeps one such
	// message whichever input emits it. Every run.finished is so scoped:
	// a run ends once even if two inputs end it, as when a redelivered
	// input sees a cancel its first delivery did not.
	RunScope string
	// At, when set, is when the message is to be delivered: it is
	// published as a scheduled message (a group's deadline).
	At time.Time
}

// Audit is one audit event of the trace: Name ("step_1.started"), the task
// it concerns if any, and its payload.
type Audit struct {
	Name    string
	TaskID  string
	Payload any
}

// Synthesise asks the adapter for the final answer to Task from the
// outputs of Steps (complete, in index order), to be fed back as
// Synthesised.
type Synthesise struct {
	Task  string
	Steps []Step
}

// Decision is what one input does to a run: the new state, the messages to
// send and the trace. Synthesise, when set, is a request the adapter must
// answer with a Synthesised input in the same hop.
type Decision struct {
	State      State
	Emits      []Emit
	Audits     []Audit
	Synthesise *Synthesise
	// Review, when set, is a supervisor's review the adapter must answer
	// with a Reviewed input in the same hop (before any synthesis).
	Review *Review
	// Ended is the run's result when this decision ends it.
	Ended *RunResult
	// Opened is the gate the run is parked at when this decision parks
	// it: the adapter keeps the state with it until it is resolved.
	Opened *Gate
	// Session, when the decision ends the run or hands it to a human, is
	// what the adapter writes to the run's session.
	Session *SessionChange
}

// Decide folds one input into the state of a run. It is a pure function:
// the same state and input always give the same decision, so replaying a
// run's recorded inputs re-derives every decision without calling a model
// or a tool. State is the state the input's message carried (zero for
// Requested and for a DeadLettered without one).
func Decide(s State, in Input) Decision {
	// The decision never writes to the caller's state: steps and history
	// are copied before they change.
	s.Plan.Steps = slices.Clone(s.Plan.Steps)
	s.Plan.ReplanHistory = slices.Clone(s.Plan.ReplanHistory)
	d := &decision{Decision: Decision{State: s}, at: in.at().UTC()}
	d.apply(in)
	if (d.Ended != nil || d.Opened != nil && d.Opened.Kind == GateHuman) && !d.untouched {
		d.Session = d.sessionChange()
	}
	return d.Decision
}

// apply folds one input into the decision.
func (d *decision) apply(in Input) {
	switch in := in.(type) {
	case Requested:
		d.requested(in)
	case Planned:
		d.planned(in.Proposal)
	case Joined:
		d.joined(in)
	case Synthesised:
		d.synthesised(in)
	case Reviewed:
		d.reviewed(in)
	case DeadLettered:
		d.deadLettered(in)
	case Cancelled:
		d.cancelled(in)
	case GateResolved:
		d.resolved(in)
	case Interrupted:
		d.interrupt = &in
		d.apply(in.Input)
	default:
		panic(fmt.Sprintf("orch: unknown input %T", in))
	}
}

// decision accumulates one Decide call.
type decision struct {
	Decision
	at time.Time
	// interrupt, when set, holds the input's next hop at an interrupt
	// gate (hold).
	interrupt *Interrupted
	// sessionStatus is the session's status the decision sets (active
	// when unset, after an agent's answer).
	sessionStatus string
	// untouched: the decision leaves the run's session as it is (a run
	// its session refused); Decision.Session stays nil.
	untouched bool
}

func (d *decision) audit(name, taskID string, payload any) {
	d.Audits = append(d.Audits, Audit{Name: name, TaskID: taskID, Payload: payload})
}

func (d *decision) emit(key string, data any) { d.Emits = append(d.Emits, Emit{Key: key, Data: data}) }

// modelCalls traces each model call and adds it to the run's totals.
func (d *decision) modelCalls(calls []domain.Call) {
	for _, c := range calls {
		d.audit("model.called", "", c)
		d.State.Usage = d.State.Usage.Add(c.Usage())
	}
}

func (d *decision) requested(in Requested) {
	req := in.Request
	d.received(req)
	if err := ValidateRequest(req); err != nil {
		d.finish(CodeValidationFail, err.Error(), nil)
		return
	}
	// Recorded first, so whatever ends the run settles its lease.
	d.State.Budget.Lease = in.QuotaLease
	if !d.continueSession(in) {
		return
	}
	if reason := agentMismatch(req, in); reason != "" {
		d.finish(CodeValidationFail, reason, map[string]any{"agent_id": req.AgentID})
		return
	}
	d.State.Context = in.Context
	if c := in.Context; c.Persona != nil || len(c.History) > 0 {
		// The trace records the context the run saw: a replay re-derives
		// its decisions from it, not from today's soul and session.
		d.audit("context.loaded", "", RunContext{Persona: c.Persona, History: c.History})
	}
	d.recalled(in)
	d.actAs(in.Agent)
	d.resumeChain(in)
	d.resumeStage(in)
	if TurnLimitReached(in.Agent, in.SessionTurns) {
		d.turnLimit(in.Agent, in.SessionTurns)
		return
	}
	if !d.agentRouted(in) {
		return
	}
	d.routed(in)
}

// routed takes the routing model's answer: a failure ends the run, a
// question parks it at a clarify gate, a route (kept in the configured
// options) resolves the run's pattern, budget and deadline and asks for
// its plan. A run routed again once its question was answered keeps the
// deadline it had.
func (d *decision) routed(in Requested) {
	d.modelCalls(in.Calls)
	if in.Failure != nil {
		d.budgetRefused(in.Failure)
		d.finish(in.Failure.Code, "routing failed: "+in.Failure.Reason, in.Failure.Evidence)
		return
	}
	if q := strings.TrimSpace(in.Route.Clarify); q != "" {
		// The model found the task ambiguous: ask, do not guess.
		d.ask(CodeAmbiguousIntent, q, "the task is ambiguous: "+q, map[string]any{"question": q, "routing_reason": in.Route.Reason}, nil)
		return
	}
	route := ConstrainRoute(in.Route, in.TaskTypes)
	if route.Pattern == "" {
		route.Pattern = PatternReact // seed 001: no pattern configured falls back to ReACT
	}
	if a := d.State.Agent; a.Supervises() {
		route.Pattern, route.Reason = PatternSupervisor, fmt.Sprintf("agent %s supervises its sub-agents (routing: %s)", a.ID, route.Reason)
	}
	d.State.TaskType, d.State.Pattern, d.State.Routing = route.TaskType, route.Pattern, route.Reason
	names := make([]string, len(in.TaskTypes))
	var candidates []string
	for i, t := range in.TaskTypes {
		names[i] = t.Name
		if t.Name == route.TaskType {
			d.State.Framing, candidates = t.Framing, t.Patterns
		}
	}
	if i := slices.IndexFunc(in.Patterns, func(p domain.Pattern) bool { return p.Name == route.Pattern }); i >= 0 {
		d.State.PatternDef = in.Patterns[i]
	}
	d.budget(in.Policy, in.QuotaLease)
	if d.State.Deadline.IsZero() {
		d.deadline()
	}
	d.audit("routing.decided", "", map[string]any{"task_type": route.TaskType, "pattern": route.Pattern,
		"reason": route.Reason, "options": names, "candidate_patterns": candidates, "framing": d.State.Framing,
		"deadline": d.State.Deadline})
	d.audit("subagent_a.spawned", "", map[string]any{"mode": planMode(route.Pattern)})
	d.emit("plan.requested", PlanRequest{Run: d.State})
}

// recalled records the memories the run recalled (memory.recalled: their
// ids, scopes and scores), or why it recalled none
// (memory.recall_failed); a run with nothing in scope records nothing.
func (d *decision) recalled(in Requested) {
	if in.RecallError != "" {
		d.audit("memory.recall_failed", "", map[string]any{"reason": in.RecallError})
	}
	mems := in.Context.Memories
	if len(mems) == 0 {
		return
	}
	type recalled struct {
		ID     string  `json:"id"`
		Scope  string  `json:"scope"`
		Score  float32 `json:"score"`
		Tokens int     `json:"tokens"`
	}
	out := make([]recalled, len(mems))
	total := 0
	for i, m := range mems {
		out[i] = recalled{ID: m.ID, Scope: m.Scope, Score: m.Score, Tokens: MemoryTokens(m.Text)}
		total += out[i].Tokens
	}
	d.audit("memory.recalled", "", map[string]any{"memories": out, "tokens": total})
}

// MemoryTokens estimates the tokens of a recalled memory's text: four
// bytes a token, as the budget's estimates of a prompt.
func MemoryTokens(text string) int { return (len(text) + 3) / 4 }

// deadline sets the run's wall-clock deadline (routing.decided records
// it) and sends it, to be delivered then: a run still going at its
// deadline ends TIMEOUT.
func (d *decision) deadline() {
	timeout := DefaultRunTimeout
	if s := d.State.Budget.Limits[DimWallClockS]; s > 0 {
		timeout = time.Duration(s * float64(time.Second))
	}
	req := d.State.Request
	d.State.Deadline = d.at.Add(timeout)
	d.Emits = append(d.Emits, Emit{Key: "run.deadline", At: d.State.Deadline,
		Data: RunDeadline{RunID: req.RunID, TenantID: req.TenantID, SessionID: req.SessionID}})
}

// Execution patterns (seed 001). The planner shapes the work by pattern:
// ReACT is one loop step over the discovered skills, plan-then-execute a
// DAG of contract-bound steps, supervisor N parallel lanes, each a loop.
const (
	PatternReact           = "react"
	PatternPlanThenExecute = "plan-then-execute"
	PatternSupervisor      = "supervisor"
)

// planMode is what the planner does for a pattern: "react" discovers the
// loop's skills, "supervise" decomposes the task into lanes, "plan"
// plans steps (any other pattern).
func planMode(pattern string) string {
	switch pattern {
	case PatternReact:
		return "react"
	case PatternSupervisor:
		return "supervise"
	}
	return "plan"
}

// received starts the state of a requested run.
func (d *decision) received(req RunRequest) {
	d.State = State{Request: req, Seq: 1, Plan: Plan{
		PlanID: PlanID(req.RunID), Status: PlanPlanning, CreatedAt: d.at}}
	d.audit("user_message.received", "", map[string]any{"message_bytes": len(req.Message)})
}

// PlanID is the plan id of a run: derived from the run id, so a
// redelivered request plans under the same id.
func PlanID(runID string) string { return "plan-" + deriveID(runID, "plan")[:18] }

// CheckRoute reports a routing decision outside the configured options:
// a task type that is not configured, or a pattern that is not one of its
// valid patterns. The router rejects such an answer and asks the model to
// repair it, naming the options.
func CheckRoute(dec domain.Route, tts []domain.TaskType) error {
	i := slices.IndexFunc(tts, func(t domain.TaskType) bool { return t.Name == dec.TaskType })
	if i < 0 {
		names := make([]string, len(tts))
		for j, t := range tts {
			names[j] = t.Name
		}
		return fmt.Errorf("task_type %q is not one of the configured task types %v", dec.TaskType, names)
	}
	if p := tts[i].Patterns; len(p) > 0 && !slices.Contains(p, dec.Pattern) {
		return fmt.Errorf("pattern %q is not a valid pattern of task type %q: choose one of %v", dec.Pattern, dec.TaskType, p)
	}
	return nil
}

// ConstrainRoute keeps the decision inside the configured options: an
// unknown task type becomes the first configured one, an invalid pattern
// the task type's default pattern (else its first valid one).
func ConstrainRoute(dec domain.Route, tts []domain.TaskType) domain.Route {
	if len(tts) == 0 {
		return dec
	}
	i := slices.IndexFunc(tts, func(t domain.TaskType) bool { return t.Name == dec.TaskType })
	if i < 0 {
		dec.Reason = fmt.Sprintf("model chose unknown task type %q; using %q", dec.TaskType, tts[0].Name)
		i = 0
	}
	dec.TaskType = tts[i].Name
	if !slices.Contains(tts[i].Patterns, dec.Pattern) && len(tts[i].Patterns) > 0 {
		dec.Pattern = tts[i].Patterns[0]
		if slices.Contains(tts[i].Patterns, tts[i].DefaultPattern) {
			dec.Pattern = tts[i].DefaultPattern
		}
	}
	return dec
}

func (d *decision) planned(p PlanProposal) {
	d.State.Usage = d.State.Usage.Add(p.Usage)
	if len(p.Spent) > 0 {
		d.State.Budget.Spent = d.State.Budget.Spent.Add(p.Spent)
	}
	switch {
	case p.Code == CodeBudgetExhausted:
		d.budgetExhausted(ResumePlan, p.Infeasible, p.Evidence, d.pendingReplan(), nil)
		return
	case p.Code != "":
		d.finish(p.Code, p.Infeasible, p.Evidence)
		return
	case p.Infeasible != "":
		d.finish(CodeImpossible, "plan infeasible: "+p.Infeasible, nil)
		return
	}
	replan := d.State.Plan.Status == PlanReplanning
	if err := d.verifyPlan(p.Steps); err != nil {
		// The critic rejects the plan before any of it runs.
		d.audit("critic.plan_rejected", "", map[string]any{"reason": err.Error(), "steps": len(p.Steps)})
		d.State.Seq++
		d.replan(StepResult{Step: p.Steps[0].Index, Outcome: OutcomeFailed, Reason: "the critic rejected the plan: " + err.Error(),
			Suggestion: "plan steps whose dependencies are earlier steps, each with a skill or model-only"})
		return
	}
	d.audit("critic.plan_verified", "", map[string]any{"steps": len(p.Steps), "verdict": VerdictAccept})
	d.State.Plan.Steps = mergeSteps(d.State.Plan.Steps, d.restrictTools(p.Steps))
	d.State.Plan.Status = PlanExecuting
	d.State.Seq++
	d.auditProposal(p.Steps, replan)
	d.dispatch()
}

// auditProposal records what the planner proposed, in the words of the
// run's pattern: a plan (received or revised), the ReACT loop's start, or
// the supervisor's decomposition into lanes (or its re-iteration).
func (d *decision) auditProposal(steps []Step, replan bool) {
	idx := make([]int, len(steps))
	for i, s := range steps {
		idx[i] = s.Index
	}
	switch mode := planMode(d.State.Pattern); {
	case mode == "react" && len(steps) == 1 && steps[0].Loop != nil:
		d.audit("react.started", steps[0].TaskID, map[string]any{"step": steps[0].Index, "skills": steps[0].Skills,
			"max_turns": steps[0].Loop.MaxTurns, "restart": replan})
	case mode == "supervise" && replan:
		d.audit("supervisor.reiterated", "", map[string]any{"lanes": idx, "iteration": d.State.Plan.ReplanCount + 1})
	case mode == "supervise":
		d.audit("supervisor.decomposed", "", map[string]any{"lanes": idx})
	case replan:
		d.audit("plan.revised", "", map[string]any{"revised_steps": idx, "replan_count": d.State.Plan.ReplanCount})
	default:
		d.audit("plan.received", "", map[string]any{"steps": len(steps)})
	}
}

// mergeSteps keeps every completed step and replaces the rest with the
// proposed steps: a revision never re-runs completed work.
func mergeSteps(old, proposed []Step) []Step {
	merged := make([]Step, 0, len(old)+len(proposed))
	for _, s := range old {
		if s.Status != StepComplete {
			s.Status = StepRevised
		}
		merged = append(merged, s)
	}
	for _, s := range proposed {
		s.Status = StepPending
		merged = append(merged, s)
	}
	return merged
}

// dispatch sends every ready step (pending, with its dependencies
// complete) as one group, asks for the answer when every step is done, or
// ends the run when nothing can run.
func (d *decision) dispatch() {
	if d.hold(nil) {
		return
	}
	plan := &d.State.Plan
	ready := plan.ready()
	if len(ready) == 0 {
		if !plan.done() {
			d.finish(CodeRepeatedFailure, "no step can run: a dependency did not complete", nil)
			return
		}
		d.conclude()
		return
	}
	if d.earlyStop() {
		return
	}
	runID := d.State.Request.RunID
	group := Group{ID: "grp-" + deriveID(runID, fmt.Sprintf("group/%d", d.State.Seq)), Expected: len(ready)}
	for _, i := range ready {
		s := &plan.Steps[i]
		s.Status = StepRunning
		s.TaskID = "task-" + deriveID(runID, fmt.Sprintf("task/%d/%d", s.Index, plan.ReplanCount))[:13]
		s.StartedAt = d.at
	}
	d.fanOut(group, ready)
	for _, i := range ready {
		s := plan.Steps[i]
		d.audit(fmt.Sprintf("step_%d.started", s.Index), s.TaskID, map[string]any{"skills": s.Skills, "group": group.ID})
		d.emit(fmt.Sprintf("step/%d", s.Index), StepRequest{Run: d.State, Step: s.Index, Group: group, Inputs: plan.inputKeys(s)})
	}
	if group.Expected > 1 {
		d.groupDeadline(group)
	}
}

// groupDeadline sends a fan-out's deadline: the group waits for its
// members until then, no longer; the server delivers the deadline then,
// and the aggregator joins the group with what finished.
func (d *decision) groupDeadline(group Group) {
	timeout := DefaultGroupTimeout
	if s := d.State.PatternDef.GroupTimeoutS; s > 0 {
		timeout = time.Duration(s) * time.Second
	}
	at := d.at.Add(timeout)
	d.audit("group.deadline_set", "", map[string]any{"group": group.ID, "deadline": at})
	d.Emits = append(d.Emits, Emit{Key: "deadline/" + group.ID, Data: GroupDeadline{Run: d.State, Group: group}, At: at})
}

// synthesise asks for the answer from the complete steps, in index order.
func (d *decision) synthesise() {
	syn := &Synthesise{Task: d.State.Task()}
	for _, s := range d.State.Plan.Steps {
		if s.Status == StepComplete {
			syn.Steps = append(syn.Steps, s)
		}
	}
	slices.SortStableFunc(syn.Steps, func(a, b Step) int { return cmp.Compare(a.Index, b.Index) })
	from := make([]map[string]any, len(syn.Steps))
	for i, st := range syn.Steps {
		from[i] = map[string]any{"step": st.Index, "task_id": st.TaskID, "memory_key": st.MemoryKey}
	}
	d.audit("synthesis.started", "", map[string]any{"derived_from": from, "missing": d.State.Missing})
	d.Synthesise = syn
}

// fanOut records a group of subagent lanes (seed 001 fan-out
// provenance): the correlation id (the group's), the expected siblings and
// each lane's goal, session and skill group.
func (d *decision) fanOut(group Group, members []int) {
	var lanes []map[string]any
	for _, i := range members {
		s := d.State.Plan.Steps[i]
		if s.Loop == nil || s.Loop.SessionID == "" {
			return
		}
		lanes = append(lanes, map[string]any{"step": s.Index, "task_id": s.TaskID, "goal": s.Task,
			"session_id": s.Loop.SessionID, "skills": s.Skills})
		if s.Loop.AgentID != "" {
			lanes[len(lanes)-1]["agent_id"] = s.Loop.AgentID // the sub-agent it runs as
		}
	}
	d.audit("fanout.started", "", map[string]any{"correlation_id": group.ID, "expected_siblings": group.Expected,
		"parent_session_id": d.State.Request.SessionID, "lanes": lanes})
}

func (p *Plan) ready() []int {
	var ready []int
	for i, s := range p.Steps {
		if s.Status != StepPending {
			continue
		}
		ok := true
		for _, dep := range s.DependsOn {
			if ds := p.Live(dep); ds == nil || ds.Status != StepComplete {
				ok = false
			}
		}
		if ok {
			ready = append(ready, i)
		}
	}
	return ready
}

func (p *Plan) done() bool {
	for _, s := range p.Steps {
		if s.Status != StepComplete && s.Status != StepRevised {
			return false
		}
	}
	return true
}

// Live returns the live (not revised) step with index idx, or nil.
func (p *Plan) Live(idx int) *Step {
	for i := range p.Steps {
		if p.Steps[i].Index == idx && p.Steps[i].Status != StepRevised {
			return &p.Steps[i]
		}
	}
	return nil
}

// Carried is the output the plan carries for memory key, or nil when it
// must be read from memory.
func (p Plan) Carried(key string) json.RawMessage {
	for _, s := range p.Steps {
		if s.MemoryKey == key && s.Status == StepComplete {
			return s.Output
		}
	}
	return nil
}

// CarriesAlone reports whether step's join will carry out (Carried): no
// other step runs or waits at a gate, and out fits carry's bounds.
func (p Plan) CarriesAlone(step int, out json.RawMessage) bool {
	return !slices.ContainsFunc(p.Steps, func(s Step) bool {
		return s.Index != step && (s.Status == StepRunning || s.Status == StepAwaitingGate)
	}) && p.carry(out) != nil
}

// carry is out when the plan may carry it: at most MaxCarriedOutput
// bytes, and at most MaxCarriedOutputs bytes with the outputs the plan
// carries already; else nil (the output is read from memory).
func (p Plan) carry(out json.RawMessage) json.RawMessage {
	if len(out) == 0 || len(out) > MaxCarriedOutput {
		return nil
	}
	total := len(out)
	for _, s := range p.Steps {
		total += len(s.Output)
	}
	if total > MaxCarriedOutputs {
		return nil
	}
	return out
}

func (p *Plan) inputKeys(s Step) []string {
	var keys []string
	for _, dep := range s.DependsOn {
		if ds := p.Live(dep); ds != nil && ds.MemoryKey != "" {
			keys = append(keys, ds.MemoryKey)
		}
	}
	return keys
}

// joined records a group's results, then ends the run on an outcome that
// replanning cannot help, replans a failure, or dispatches the next steps.
func (d *decision) joined(in Joined) {
	d.State.Seq++
	if in.Partial {
		d.cutOff(in)
		return
	}
	failed, end := d.record(in.Results)
	handoff, handedOff := handoffOf(in.Results)
	parked := slices.DeleteFunc(slices.Clone(failed), func(r StepResult) bool { return r.Outcome != OutcomeAwaitingGate })
	failed = slices.DeleteFunc(failed, func(r StepResult) bool { return r.Outcome == OutcomeAwaitingGate })
	if in.Group.Expected > 1 {
		steps := make([]int, len(in.Results))
		for i, r := range in.Results {
			steps[i] = r.Step
		}
		d.audit("fanin.joined", "", map[string]any{"correlation_id": in.Group.ID, "expected_siblings": in.Group.Expected,
			"steps": steps, "failed": len(failed)})
	}
	switch {
	case end.Code != "":
		d.verdict(VerdictEscalate, end.Reason, in.Results)
	case handedOff:
		d.verdict(VerdictEscalate, "handoff to "+handoff.Handoff.To, in.Results)
	case len(failed) > 0 && d.halts(failed[0]) != "":
		d.verdict(VerdictEscalate, failed[0].Reason, in.Results)
	case len(failed) > 0:
		d.verdict(VerdictReplan, failed[0].Reason, in.Results)
	case len(parked) > 0:
		d.verdict(VerdictEscalate, "awaiting approval", in.Results)
	default:
		d.verdict(VerdictAccept, "", in.Results)
	}
	stopped := budgetStops(in.Results)
	switch {
	case end.Code == CodeUserCancel:
		d.cancel(end.Reason, nil)
	case end.Code == CodeBudgetExhausted && len(stopped) > 0:
		d.budgetExhausted(ResumeSteps, end.Reason, end.Evidence, nil, stopped)
	case end.Code != "":
		d.finish(end.Code, end.Reason, end.Evidence)
	case handedOff:
		d.handoff(handoff, in)
	case len(failed) > 0:
		d.replan(failed[0])
	case len(parked) > 0:
		d.parkSteps(parked)
	default:
		d.dispatch()
	}
}

// cutOff takes a group joined at its deadline: the members that
// finished are recorded, the others fail (deadline passed), and the run
// answers from what it has, ending PARTIAL_SUCCESS with the missing steps
// named; with nothing complete at all it ends TIMEOUT. Nothing is
// replanned or dispatched after a deadline.
func (d *decision) cutOff(in Joined) {
	_, end := d.record(in.Results)
	var missing []map[string]any
	for i := range d.State.Plan.Steps {
		s := &d.State.Plan.Steps[i]
		if s.Status != StepRunning && s.Status != StepAwaitingGate {
			continue
		}
		s.Status, s.FailureReason = StepFailed, "deadline passed before it finished"
		d.State.Missing = append(d.State.Missing, s.Index)
		missing = append(missing, map[string]any{"step": s.Index, "task": s.Task, "task_id": s.TaskID})
	}
	d.audit("fanin.deadline", "", map[string]any{"correlation_id": in.Group.ID, "expected_siblings": in.Group.Expected,
		"finished": len(in.Results), "missing": missing})
	switch {
	case end.Code == CodeUserCancel:
		d.cancel(end.Reason, nil)
	case end.Code != "":
		d.finish(end.Code, end.Reason, end.Evidence)
	case !slices.ContainsFunc(d.State.Plan.Steps, func(s Step) bool { return s.Status == StepComplete }):
		d.finish(CodeTimeout, "no step finished before its group's deadline", map[string]any{"missing": missing})
	default:
		d.synthesise()
	}
}

// missingNote names the steps a deadline cut off, for the answer.
func (d *decision) missingNote() string {
	var b strings.Builder
	b.WriteString("\n\nNot included: the deadline passed before ")
	for i, idx := range d.State.Missing {
		if i > 0 {
			b.WriteString(", ")
		}
		task := ""
		if s := d.State.Plan.Live(idx); s != nil {
			task = s.Task
		}
		fmt.Fprintf(&b, "step %d (%s)", idx, task)
	}
	b.WriteString(" finished.")
	return b.String()
}

// endings are the step outcomes that end the run, since replanning cannot
// help them, with their terminal codes, first the one that wins when a
// group reports several.
var endings = []struct{ outcome, code string }{
	{OutcomeCancelled, CodeUserCancel},
	{OutcomeUnsafe, CodeUnsafeDetection},            // a safety guard fails closed
	{OutcomePermissionDenied, CodePermissionDenied}, // the Skill Service refused, or the model kept overreaching
	{OutcomeBudgetExhausted, CodeBudgetExhausted},
	{OutcomeTimedOut, CodeTimeout},
	{OutcomeRepeatedCall, CodeRepeatedFailure}, // the loop guard blocked a repeated call
	{OutcomeInvalidOutput, CodeValidationFail}, // the model's output stays invalid
	{OutcomeUnavailable, CodeUnavailableDep},   // the model, or a skill's circuit, is unavailable
}

// record writes a group's results into the plan. It returns the failed
// results, and the terminal code and reason one of them ends the run
// with, if any.
func (d *decision) record(results []StepResult) ([]StepResult, Failure) {
	var failed []StepResult
	for _, res := range results {
		s := d.State.Plan.Live(res.Step)
		if s == nil {
			continue
		}
		d.State.Usage = d.State.Usage.Add(res.Usage)
		d.State.Budget.Spent = d.State.Budget.Spent.Add(res.Spent)
		d.State.Tools = d.State.Tools.Add(res.Tools)
		s.FinishedAt = res.FinishedAt
		if res.Outcome == OutcomeComplete {
			s.Status, s.MemoryKey, s.Validated = StepComplete, res.MemoryKey, res.Validated
			s.Output = d.State.Plan.carry(res.Output)
			d.audit(fmt.Sprintf("step_%d.complete", s.Index), s.TaskID, map[string]any{"memory_key": res.MemoryKey})
			continue
		}
		if res.Outcome == OutcomeAwaitingGate && res.Parked != nil {
			s.Status = StepAwaitingGate
			d.audit(fmt.Sprintf("step_%d.awaiting_gate", s.Index), s.TaskID, map[string]any{"action": res.Parked.Call.Skill,
				"args_hash": res.Parked.Call.ArgsHash, "risk": res.Parked.Call.Mode})
			failed = append(failed, res)
			continue
		}
		if res.Outcome == OutcomeHandoff && res.Handoff != nil {
			// The target (an agent's new plan, or a human) takes over
			// the step's work.
			s.Status, s.FailureReason = StepRevised, "handed off to "+res.Handoff.To+": "+res.Handoff.Reason
			d.audit(fmt.Sprintf("step_%d.handed_off", s.Index), s.TaskID, map[string]any{"to": res.Handoff.To,
				"target_agent_id": res.Handoff.TargetAgentID, "reason": res.Handoff.Reason})
			continue
		}
		if res.Outcome == OutcomeAwaitingGate || res.Outcome == OutcomeHandoff {
			res.Outcome, res.Reason = OutcomeFailed, res.Outcome+" without what it carries"
		}
		s.Status, s.FailureReason = StepFailed, res.Reason
		d.audit(fmt.Sprintf("step_%d.failed", s.Index), s.TaskID, map[string]any{"outcome": res.Outcome, "reason": res.Reason})
		failed = append(failed, res)
	}
	for _, e := range endings {
		if i := slices.IndexFunc(failed, func(r StepResult) bool { return r.Outcome == e.outcome }); i >= 0 {
			return failed, Failure{Code: e.code, Reason: failed[i].Reason, Evidence: failed[i].Evidence}
		}
	}
	return failed, Failure{}
}

// replan asks the planner to revise the remaining steps, or ends the run
// with the structured failure once the run's replan limit was spent.
func (d *decision) replan(f StepResult) {
	plan := &d.State.Plan
	if d.qualityHalt(f) {
		return
	}
	if d.repeatsFailure(f) {
		return
	}
	if plan.ReplanCount >= d.State.maxReplans() && f.Outcome == OutcomeInsufficient {
		// The executor said what it lacks, and no revision supplied it:
		// ask the user for it.
		d.ask(CodeMissingInfo, f.Reason, "the task needs information no replan could supply: "+f.Reason, map[string]any{
			"step": f.Step, "missing": f.Reason, "suggestion": f.Suggestion, "replans": plan.ReplanCount}, &f)
		return
	}
	if plan.ReplanCount >= d.State.maxReplans() {
		var done []map[string]any
		for _, s := range plan.Steps {
			if s.Status == StepComplete {
				done = append(done, map[string]any{"step": s.Index, "task": s.Task, "memory_key": s.MemoryKey})
			}
		}
		d.finish(CodeRepeatedFailure, "max replan attempts reached", map[string]any{
			"status": "failed", "reason": "max replan attempts reached", "completed_steps": done,
			"last_failure": map[string]any{"step": f.Step, "reason": f.Reason},
		})
		return
	}
	d.revise(f)
}

// revise asks the planner to revise the remaining steps after failure f
// (the guards of replan passed, or the user answered what f lacked), if
// the reflection budget allows another pass and no interrupt holds it.
func (d *decision) revise(f StepResult) {
	plan := &d.State.Plan
	if !d.reflectionLeft(f) || d.hold(&f) {
		return
	}
	plan.ReplanCount++
	plan.Status = PlanReplanning
	plan.ReplanHistory = append(plan.ReplanHistory, ReplanRecord{
		Attempt: plan.ReplanCount, Trigger: f.Outcome, FailedStep: f.Step, Reason: f.Reason, RevisedAt: d.at,
	})
	d.audit("replan.triggered", "", map[string]any{"attempt": plan.ReplanCount, "failed_step": f.Step, "trigger": f.Outcome})
	d.audit("subagent_a.spawned", "", map[string]any{"mode": "replan"})
	d.emit(fmt.Sprintf("replan/%d", plan.ReplanCount), PlanRequest{Run: d.State, Failure: &f})
}

func (d *decision) synthesised(in Synthesised) {
	d.modelCalls(in.Calls)
	if in.Failure != nil {
		d.budgetRefused(in.Failure)
		if in.Failure.Code == CodeBudgetExhausted {
			d.budgetExhausted(ResumeSynthesis, "synthesis failed: "+in.Failure.Reason, in.Failure.Evidence, nil, nil)
			return
		}
		d.finish(in.Failure.Code, "synthesis failed: "+in.Failure.Reason, in.Failure.Evidence)
		return
	}
	d.State.Plan.Status = PlanComplete
	if len(d.State.Missing) > 0 {
		note := d.missingNote()
		d.end(CodePartialSuccess, in.Answer+note, strings.TrimSpace(note), map[string]any{"missing_steps": d.State.Missing})
		return
	}
	d.end(CodeSuccess, in.Answer, "", nil)
}

// finish ends a run that failed with code and reason.
func (d *decision) finish(code, reason string, detail any) {
	d.finishAs(PlanFailed, code, reason, detail)
}

// finishAs ends a run that failed with code and reason, its plan in
// status (failed, or expired at a gate).
func (d *decision) finishAs(status, code, reason string, detail any) {
	if raw, ok := detail.(json.RawMessage); ok && len(raw) == 0 {
		detail = nil
	}
	if e := d.State.Budget.Escalation; e != nil && slices.Contains(e.On, code) {
		d.escalate(*e, code, reason, detail)
		return
	}
	d.State.Plan.Status = status
	d.end(code, "The task could not be completed: "+reason, reason, detail)
}

func (d *decision) end(code, response, reason string, detail any) {
	d.State.Seq++
	d.State.Plan.CompletedAt = d.at
	res := RunResult{
		RunID: d.State.Request.RunID, TenantID: d.State.Request.TenantID, SessionID: d.State.Request.SessionID,
		PlanID: d.State.Plan.PlanID, Status: d.State.Plan.Status, TerminalCode: code, Response: response, Reason: reason,
		Steps: d.State.Plan.Steps, Usage: d.State.Usage, Answered: d.State.Answered(),
	}
	if detail != nil {
		res.Detail, _ = json.Marshal(detail) // maps of strings and numbers always marshal
	}
	if d.State.Plan.PlanID != "" {
		res.Decision = d.finalRecord(code)
	}
	fin := map[string]any{"status": res.Status, "terminal_code": code, "reason": reason, "usage": d.State.Usage,
		"decision": res.Decision, "task_type": d.State.TaskType, "pattern": d.State.Pattern, "replans": d.State.Plan.ReplanCount}
	if lim := d.State.Budget.Limits; len(lim) > 0 {
		fin["budget"] = map[string]any{"limits": lim, "used": d.State.Known()}
	}
	d.execution(fin, response)
	d.audit("run.finished", "", fin)
	d.finished(res)
}

// ExecutionTextMax bounds the message and the answer run.finished
// carries for the run's execution record.
const ExecutionTextMax = 4096

// execution adds to the run.finished payload fin what the run's
// execution record needs besides its outcome and usage: who ran it (the
// agent that answered, the user, the trigger), its message and answer
// (clipped), when it started and how long it took, its tool calls and
// its handoff chain.
func (d *decision) execution(fin map[string]any, response string) {
	req := d.State.Request
	fin["run_id"], fin["session_id"], fin["agent_id"] = req.RunID, req.SessionID, d.agentID()
	fin["user_id"], fin["trigger_id"] = req.UserID, req.TriggerID
	fin["message"], fin["response"] = clipText(req.Message, ExecutionTextMax), clipText(response, ExecutionTextMax)
	if start := d.State.Plan.CreatedAt; !start.IsZero() {
		fin["started_at"], fin["latency_ms"] = start, max(d.at.Sub(start).Milliseconds(), 0)
	}
	if len(d.State.Tools) > 0 {
		fin["tools"] = d.State.Tools
	}
	if chain := d.chain(); len(chain) > 0 {
		fin["handoff_chain"] = chain
	}
}

// finished emits the run's result, its id scoped to the run.
func (d *decision) finished(res RunResult) {
	d.Emits = append(d.Emits, Emit{Key: "run.finished", Data: res, RunScope: res.RunID})
	d.Ended = &res
}

// deadLettered fails the run of a dead-lettered message, so a caller never
// waits forever for a run whose message was removed. A request removed for
// being invalid ends VALIDATION_FAIL; one whose deliveries ran out on
// transient errors ends UNAVAILABLE_DEP; any other message REPEATED_FAILURE.
func (d *decision) deadLettered(in DeadLettered) {
	code := CodeRepeatedFailure
	switch {
	case in.FromRequest && in.Exhausted:
		code = CodeUnavailableDep
	case in.FromRequest:
		code = CodeValidationFail
	}
	if in.Carried != nil && in.Carried.Request.RunID == in.RunID {
		d.State = *in.Carried
		d.finish(code, "message dead-lettered: "+in.Reason, nil)
		return
	}
	res := RunResult{RunID: in.RunID, TenantID: in.TenantID, SessionID: in.SessionID, Status: PlanFailed,
		TerminalCode: code, Response: "The task could not be completed: " + in.Reason, Reason: in.Reason}
	d.finished(res)
}
