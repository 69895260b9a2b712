package orch

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	json "github.com/go-json-experiment/json/v1"

	"github.com/agentbus/agentbus/domain"
)

// Handoffs (seed 002). A run acting as an agent may hand the conversation
// to another agent (one its agent names in sub_agents) or to a human. The
// executor offers the two system tools to the model, intercepts their
// calls and ends the step with OutcomeHandoff and the request; the decider
// takes it here: an accepted agent handoff continues the same run as the
// target agent (a new plan, the conversation and the handoff's context
// carried), a refused one ends the run PERMISSION_DENIED, and a human
// handoff parks the run at a human gate until someone replies.

// The handoff tools the executor offers to a run acting as an agent.
const (
	ToolHandoffToAgent = "handoff_to_agent"
	ToolHandoffToHuman = "handoff_to_human"
)

// OutcomeHandoff: the step's model handed the conversation off
// (StepResult.Handoff says to whom); the step is replaced by the target's
// work.
const OutcomeHandoff = "handoff"

// MaxHandoffDepth bounds an agent handoff chain: the initial agent is
// level 0, and a handoff that would reach level 4 is refused.
const MaxHandoffDepth = 3

// Handoff targets.
const (
	HandoffToAgent = "agent"
	HandoffToHuman = "human"
)

// GateHuman is the gate of a run handed to a human: it opens with the
// handoff's packet, and a human's reply (POST
// /agent/sessions/{session_id}/reply) approves it with the answer.
const GateHuman = "human"

// Session statuses (seed 002 Agent Session).
const (
	SessionActive    = "active"
	SessionHandedOff = "handed_off"
	SessionCompleted = "completed"
)

// Handoff behaviours of an agent whose session reached its max_turns.
const (
	HandoffEscalate = "escalate"
	HandoffEnd      = "end"
)

// Handoff is the handoff a step's model asked for: to an agent (its id)
// or to a human (with a priority), why, and what the target should know.
type Handoff struct {
	To            string          `json:"to"`
	TargetAgentID string          `json:"target_agent_id,omitempty"`
	Reason        string          `json:"reason"`
	Priority      string          `json:"priority,omitempty"`
	Context       json.RawMessage `json:"context,omitempty"`
	// Stage, to HandoffToStage, is the stage a transition tool moves
	// to; Tool is the tool the model called.
	Stage string `json:"stage,omitempty"`
	// Skill, to HandoffToSkill, is the skill load_skill loads.
	Skill string `json:"skill,omitempty"`
	Tool  string `json:"tool,omitempty"`
}

// HandoffRecord is one accepted agent handoff of the run's chain.
type HandoffRecord struct {
	From    string          `json:"from_agent_id"`
	To      string          `json:"to_agent_id"`
	Reason  string          `json:"reason"`
	Depth   int             `json:"depth"`
	Context json.RawMessage `json:"context,omitempty"`
	At      time.Time       `json:"at"`
	// Routed says a router agent handed the run to its sub-agent by
	// classifying the message (agent_route.go), not a model's handoff.
	Routed bool `json:"routed,omitempty"`
}

// HumanHandoff is the packet of a run handed to a human: why, how urgent,
// what the conversation was, what the agents knew and who they were.
// Trigger is the tool (handoff_to_human) or max_turns.
type HumanHandoff struct {
	Reason   string          `json:"reason"`
	Priority string          `json:"priority"`
	Summary  string          `json:"summary"`
	Context  json.RawMessage `json:"context,omitempty"`
	Agents   []string        `json:"agents,omitempty"`
	Trigger  string          `json:"trigger"`
}

// SessionChange is what a decision that ends or hands off a run does to
// its session: its status, its current agent, the handoff depth and last
// reason, whether the run's answer was an agent's turn, and the packet of
// a human handoff (with the run and gate a reply resolves).
type SessionChange struct {
	Status        string        `json:"status"`
	AgentID       string        `json:"agent_id,omitempty"`
	ParentAgentID string        `json:"parent_agent_id,omitempty"`
	Depth         int           `json:"handoff_depth,omitempty"`
	Reason        string        `json:"handoff_reason,omitempty"`
	Chain         []string      `json:"handoff_chain,omitempty"`
	AgentTurn     bool          `json:"agent_turn,omitempty"`
	Handoff       *HumanHandoff `json:"handoff,omitempty"`
	RunID         string        `json:"run_id,omitempty"`
	GateID        string        `json:"gate_id,omitempty"`
	// Stage is the stage the session's agent is in after the run, and
	// Skills the skills it loaded: the session's next run continues
	// there (stages.go). RoutedBy is the router agent that handed the run
	// to AgentID: the session stays the router's.
	Stage    string   `json:"stage,omitempty"`
	Skills   []string `json:"loaded_skills,omitempty"`
	RoutedBy string   `json:"routed_by,omitempty"`
	// Window, for a run of an agent, is the agent's history window the
	// session is condensed to with the run's exchange.
	Window *HistoryWindow `json:"history_window,omitempty"`
}

// TurnLimitReached reports whether a session that had turns agent turns
// has no turn left for agent a (its max_turns; 0 is unlimited).
func TurnLimitReached(a *AgentDef, turns int) bool {
	return a != nil && a.MaxTurns > 0 && turns >= a.MaxTurns
}

// handoffOf returns the first handoff among a group's results.
func handoffOf(results []StepResult) (StepResult, bool) {
	i := slices.IndexFunc(results, func(r StepResult) bool { return r.Outcome == OutcomeHandoff && r.Handoff != nil })
	if i < 0 {
		return StepResult{}, false
	}
	return results[i], true
}

// handoff takes a step's handoff: to a human, the run parks; to an
// agent, the run goes on as that agent if the chain allows it, and ends
// PERMISSION_DENIED if it does not.
func (d *decision) handoff(r StepResult, in Joined) {
	h := *r.Handoff
	switch h.To {
	case HandoffToStage:
		d.transition(r, h)
		return
	case HandoffToSkill:
		d.loadSkill(r, h)
		return
	}
	if h.To == HandoffToHuman {
		d.toHuman(h.Reason, h.Priority, h.Context, ToolHandoffToHuman)
		return
	}
	if reason := d.refusal(h, in); reason != "" {
		d.audit("handoff.refused", "", map[string]any{"from_agent_id": d.agentID(), "to_agent_id": h.TargetAgentID,
			"reason": reason, "depth": len(d.State.Handoffs) + 1, "chain": d.chain()})
		d.finish(CodePermissionDenied, "handoff refused: "+reason, map[string]any{"from_agent_id": d.agentID(),
			"to_agent_id": h.TargetAgentID, "chain": d.chain(), "max_depth": MaxHandoffDepth})
		return
	}
	rec := HandoffRecord{From: d.agentID(), To: h.TargetAgentID, Reason: h.Reason, Depth: len(d.State.Handoffs) + 1,
		Context: h.Context, At: d.at}
	d.State.Handoffs = append(slices.Clone(d.State.Handoffs), rec)
	d.switchAgent(in.Target)
	note := fmt.Sprintf("Agent %s handed the conversation to agent %s: %s", rec.From, rec.To, h.Reason)
	if len(h.Context) > 0 {
		note += "\nContext: " + string(h.Context)
	}
	d.State.Context.History = append(slices.Clone(d.State.Context.History),
		domain.HistoryMessage{Role: "summary", Content: clipText(note, 1000)})
	d.audit("handoff.accepted", "", rec)
	d.State.Plan.Status = PlanReplanning
	d.audit("subagent_a.spawned", "", map[string]any{"mode": "handoff"})
	f := r
	f.Reason = fmt.Sprintf("handed off to agent %s: %s", rec.To, h.Reason)
	d.emit(fmt.Sprintf("handoff/%d", rec.Depth), PlanRequest{Run: d.State, Failure: &f})
}

// refusal says why an agent handoff cannot be taken, or "".
func (d *decision) refusal(h Handoff, in Joined) string {
	if d.State.Agent == nil {
		return "the run acts as no agent"
	}
	return HandoffRefusal(d.State.Agent, d.chain(), h.TargetAgentID, in.Target, in.TargetError)
}

// agentID is the id of the agent the run acts as now, or "".
func (d *decision) agentID() string {
	if a := d.State.Agent; a != nil {
		return a.ID
	}
	return ""
}

// chain is the run's agents in handoff order: the first, then each
// handoff's target.
func (d *decision) chain() []string {
	var out []string
	if len(d.State.Handoffs) > 0 {
		out = append(out, d.State.Handoffs[0].From)
	} else if a := d.State.Agent; a != nil {
		out = append(out, a.ID)
	}
	for _, h := range d.State.Handoffs {
		out = append(out, h.To)
	}
	return out
}

// switchAgent makes the run act as a: its definition in the state, its
// instructions in place of the previous agent's in the persona.
func (d *decision) switchAgent(a *AgentDef) {
	d.dropPrompts()
	prev := d.State.Agent
	if p := d.State.Context.Persona; p != nil && prev != nil {
		q := *p
		q.Instructions = strings.TrimSpace(strings.TrimSuffix(q.Instructions, prev.Instructions))
		if q.Name == prev.Name {
			q.Name = ""
		}
		d.State.Context.Persona = &q
		if q.Instructions == "" && q.Name == "" && q.Tone == "" && q.Language == "" && len(q.Policies) == 0 {
			d.State.Context.Persona = nil
		}
	}
	if a.Supervises() {
		d.State.Pattern = PatternSupervisor // a supervisor's work is its sub-agents' lanes
	}
	d.actAs(a)
}

// toHuman parks the run at a human gate with the handoff's packet; the
// session is handed off until a human replies.
func (d *decision) toHuman(reason, priority string, ctx json.RawMessage, trigger string) {
	if priority == "" {
		priority = "normal"
	}
	p := HumanHandoff{Reason: reason, Priority: priority, Summary: d.summary(), Context: ctx, Agents: d.chain(), Trigger: trigger}
	req := d.State.Request
	d.audit("session.handoff.human", "", map[string]any{"tenant_id": req.TenantID, "session_id": req.SessionID,
		"run_id": req.RunID, "reason": reason, "priority": priority, "context": ctx, "agents": p.Agents, "trigger": trigger})
	d.sessionStatus = SessionHandedOff
	d.openGate(Gate{Kind: GateHuman, Handoff: &p})
}

// summary is the conversation so far, as a human taking it over reads
// it: the session's recent messages, then the run's request.
func (d *decision) summary() string {
	var b strings.Builder
	for _, m := range d.State.Context.History {
		fmt.Fprintf(&b, "%s: %s\n", m.Role, clipText(m.Content, 300))
	}
	fmt.Fprintf(&b, "user: %s", clipText(d.State.Request.Message, 1000))
	return b.String()
}

// turnLimit applies the agent's handoff behaviour to a run whose session
// has no turn left: escalate hands it to a human, end ends the session.
func (d *decision) turnLimit(a *AgentDef, turns int) {
	d.audit("session.turn_limit", "", map[string]any{"agent_id": a.ID, "max_turns": a.MaxTurns, "turns": turns,
		"handoff_behavior": a.HandoffBehavior})
	reason := fmt.Sprintf("the session reached agent %s's limit of %d turns", a.ID, a.MaxTurns)
	if a.HandoffBehavior == HandoffEnd {
		d.sessionStatus = SessionCompleted
		d.finish(CodeBudgetExhausted, reason+"; the session is ended", map[string]any{"limit": "max_turns",
			"max_turns": a.MaxTurns, "turns": turns, "handoff_behavior": HandoffEnd})
		return
	}
	d.toHuman(reason, "normal", nil, "max_turns")
}

// replied ends a run handed to a human with the human's reply as its
// answer; the session is active again, or completed if the human ended
// it.
func (d *decision) replied(in GateResolved, detail map[string]any) {
	d.sessionStatus = SessionActive
	if in.EndSession {
		d.sessionStatus = SessionCompleted
	}
	d.State.Plan.Status = PlanComplete
	d.end(CodeSuccess, in.Comment, "", detail)
}

// sessionChange is what the decision does to the run's session, when it
// ends the run or hands it to a human. Only a run its agent answered is
// an agent turn: not one handed to a human, answered by one, or stopped
// by the turn limit.
func (d *decision) sessionChange() *SessionChange {
	c := &SessionChange{Status: cmp.Or(d.sessionStatus, SessionActive), AgentID: d.agentID(),
		Depth: len(d.State.Handoffs), AgentTurn: d.State.Agent != nil && d.sessionStatus == ""}
	if n := len(d.State.Handoffs); n > 0 {
		c.Reason, c.ParentAgentID, c.Chain = d.State.Handoffs[n-1].Reason, d.State.Handoffs[n-1].From, d.chain()
	}
	d.stageChange(c)
	if a := d.State.Agent; a != nil {
		w := a.History.Resolved()
		c.Window = &w
	}
	if g := d.Opened; g != nil && g.Kind == GateHuman {
		c.Handoff, c.RunID, c.GateID, c.Reason = g.Handoff, d.State.Request.RunID, g.ID, g.Handoff.Reason
	}
	return c
}

// clipText cuts s to at most n bytes on a rune boundary, marking the cut.
func clipText(s string, n int) string {
	if len(s) <= n {
		return s
	}
	cut := n - len("…")
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}
