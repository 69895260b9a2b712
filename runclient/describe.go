package runclient

import (
	"fmt"
	"strings"
	"time"

	json "github.com/go-json-experiment/json/v1"

	"github.com/agentbus/agentbus/orch"
)

// Describe is a one-line account, as a person reads it, of a chunk that
// reports how a run goes: a progress event, a thought, an observation or
// a skill's progress. ok is false for the other chunks (an answer, a
// result, a gate, a session_progress envelope), which say more than a
// line.
func Describe(c Chunk) (line string, ok bool) {
	switch c.MessageType {
	case "progress":
		return describeProgress(c.Content), true
	case ChunkThought:
		return "thought: " + OneLine(c.Content, 200), true
	case ChunkObservation:
		var o Observation
		if json.Unmarshal([]byte(c.Content), &o) != nil {
			return "", false
		}
		what := "observed"
		if o.IsError {
			what = "failed"
		}
		return fmt.Sprintf("step_%d %s %s: %s", o.StepIndex, o.SkillID, what, OneLine(o.Result, 120)), true
	case ChunkToolProgress:
		var p ToolProgress
		if json.Unmarshal([]byte(c.Content), &p) != nil {
			return "", false
		}
		line := fmt.Sprintf("step_%d %s: %g", p.StepIndex, p.SkillID, p.Progress)
		if p.Total > 0 {
			line += fmt.Sprintf("/%g", p.Total)
		}
		if p.Message != "" {
			line += " " + OneLine(p.Message, 120)
		}
		return line, true
	}
	return "", false
}

// describeProgress reads a progress chunk's content: an audit event's
// name, a space, its payload.
func describeProgress(content string) string {
	name, payload, _ := strings.Cut(content, " ")
	var p map[string]any
	_ = json.Unmarshal([]byte(payload), &p)
	switch {
	case name == "routing.decided":
		return fmt.Sprintf("routed: task type %v, pattern %v", p["task_type"], p["pattern"])
	case name == "plan.received":
		return fmt.Sprintf("plan received: %v steps", p["steps"])
	case strings.HasSuffix(name, ".started"):
		return fmt.Sprintf("%s started  (skills %v)", strings.TrimSuffix(name, ".started"), p["skills"])
	case strings.HasSuffix(name, ".complete"):
		return fmt.Sprintf("%s complete → memory %v", strings.TrimSuffix(name, ".complete"), p["memory_key"])
	case strings.HasSuffix(name, ".failed"):
		return fmt.Sprintf("%s failed: %v", strings.TrimSuffix(name, ".failed"), p["reason"])
	}
	return name + " " + payload
}

// GateMessage says what a gate waits for: until when, and each held call
// (its step, skill, approval mode and arguments) or question; a clarify
// gate's question, a budget gate's ledger.
func GateMessage(g orch.GatePacket) string {
	msg := fmt.Sprintf("The run waits at gate %s for a decision until %s.", g.Gate, g.ExpiresAt.Format(time.RFC3339))
	if q := g.Question; q != nil {
		msg = fmt.Sprintf("The run asks: %s\n(answer it by gate %s, or with the session's next message, until %s)", q.Text, g.Gate,
			g.ExpiresAt.Format(time.RFC3339))
	}
	if b := g.Budget; b != nil {
		msg = fmt.Sprintf("The run's budget ran out (%s); it waits at gate %s until %s for an extension of its limits %v (used %v, caps %v).",
			b.Reason, g.Gate, g.ExpiresAt.Format(time.RFC3339), b.Limits, b.Used, b.Caps)
	}
	for _, a := range g.Actions {
		if a.Action == "" {
			continue // a step the budget stopped: it holds no call
		}
		if q := a.Elicitation; q != nil {
			msg += fmt.Sprintf("\n  step %d: %s asks %q (answer schema %s)", a.Step, a.Action, q.Message, q.Schema)
			continue
		}
		msg += fmt.Sprintf("\n  step %d wants to call %s (%s) with %s", a.Step, a.Action, a.Risk, a.Parameters)
	}
	return msg
}

// OneLine is s on one line, cut to at most n runes.
func OneLine(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if r := []rune(s); len(r) > n {
		return string(r[:n]) + "…"
	}
	return s
}
