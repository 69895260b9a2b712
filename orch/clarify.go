package orch

import (
	"fmt"
	"slices"
	"strings"
	"time"

	json "github.com/go-json-experiment/json/v1"
)

// Clarify gates (seed 003: execution suspends until the user answers,
// then resumes with the completed steps kept). A run that needs one more
// fact (a step reported the information insufficient and no replan could
// supply it) or whose intent the routing model found ambiguous does not
// end: it parks at a clarify gate with its question, holding its plan and
// its completed steps. The answer (the approval's content, or the
// session's next message while the gate is open) resumes the same run:
// an ambiguous run is routed again with its clarification, a run that
// lacked a fact replans the step that lacked it, and every model of the
// run sees the question and its answer from then on. Denied, or expired,
// the gate ends the run with the code it would have ended with:
// MISSING_INFO or AMBIGUOUS_INTENT.

// GateClarify is the gate of a run that asks its user a question.
const GateClarify = "clarify"

// MaxClarifications bounds the questions one run asks: once it has
// asked so many, a run that needs another answer ends with its code.
const MaxClarifications = 3

// Question is what a clarify gate asks: the question, and the terminal
// code, reason and evidence the run ends with if nobody answers.
type Question struct {
	Text   string          `json:"question"`
	Code   string          `json:"code"`
	Reason string          `json:"reason"`
	Detail json.RawMessage `json:"detail,omitempty"`
}

// Clarification is one question the run asked and its answer: who gave
// it, when, and, when it was the session's next message, the id of that
// message's run request.
type Clarification struct {
	Gate     string    `json:"gate_id"`
	Question string    `json:"question"`
	Answer   string    `json:"answer"`
	By       string    `json:"by,omitempty"`
	RunID    string    `json:"answer_run_id,omitempty"`
	At       time.Time `json:"at"`
}

// Task is the run's task as its models see it: the user's message, then
// every question the run asked and the answer it got.
func (s RunState) Task() string {
	if len(s.Clarifications) == 0 {
		return s.Request.Message
	}
	var b strings.Builder
	b.WriteString(s.Request.Message)
	for _, c := range s.Clarifications {
		fmt.Fprintf(&b, "\n\nAsked: %s\nAnswered: %s", c.Question, c.Answer)
	}
	return b.String()
}

// Answered are the run requests whose messages answered the run's
// questions (their callers wait for this run's result).
func (s RunState) Answered() []string {
	var out []string
	for _, c := range s.Clarifications {
		if c.RunID != "" {
			out = append(out, c.RunID)
		}
	}
	return out
}

// ask parks the run at a clarify gate with question; held is the step
// whose replan the answer resumes (nil: the run is routed again). A run
// that asked MaxClarifications questions already ends with code, reason
// and detail instead.
func (d *decision) ask(code, question, reason string, detail any, held *StepResult) {
	if len(d.State.Clarifications) >= MaxClarifications {
		d.finish(code, reason, detail)
		return
	}
	raw, _ := json.Marshal(detail) // maps of strings and numbers always marshal
	d.audit("clarification.requested", "", map[string]any{"question": question, "code": code, "reason": reason,
		"asked": len(d.State.Clarifications) + 1})
	d.openGate(Gate{Kind: GateClarify, Question: &Question{Text: question, Code: code, Reason: reason, Detail: raw},
		Replan: held})
}

// clarified resumes a run whose question was answered: the answer joins
// the run's clarifications (every later model call of the run sees it),
// then an ambiguous run is routed again with it and a run that lacked a
// fact replans the step that lacked it, whatever replans it has spent.
func (d *decision) clarified(g Gate, in GateResolved) {
	c := Clarification{Gate: g.ID, Question: g.Question.Text, Answer: in.Answer, By: in.By, RunID: in.AnswerRun, At: in.At.UTC()}
	d.State.Clarifications = append(slices.Clone(d.State.Clarifications), c)
	d.audit("clarification.answered", "", c)
	if g.Replan == nil {
		if in.Rerouted == nil {
			// The router routes an answered question of intent before
			// the decider sees it; without its route the run cannot go on.
			d.finish(g.Question.Code, g.Question.Reason+" (the answer was not routed)", nil)
			return
		}
		d.State.Plan.Status = PlanPlanning
		d.routed(*in.Rerouted)
		return
	}
	f := *g.Replan
	f.Suggestion = strings.TrimSpace(f.Suggestion + " The user was asked " + fmt.Sprintf("%q", g.Question.Text) +
		" and answered: " + in.Answer)
	d.revise(f)
}
