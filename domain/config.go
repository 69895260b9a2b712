package domain

import json "github.com/go-json-experiment/json/v1"

// TaskType is a configured class of task the router chooses from (seed 001).
type TaskType struct {
	Name        string `json:"name"`
	Description string `json:"description"`
	// WhenToUse tells the routing model which tasks belong here.
	WhenToUse string   `json:"when_to_use,omitempty"`
	Patterns  []string `json:"valid_patterns"`
	// DefaultPattern is the pattern of a routing decision whose pattern
	// is not valid for the type; default the first valid pattern.
	DefaultPattern string `json:"default_pattern,omitempty"`
	// Framing is the domain framing every model of a run of this type is
	// given ("analyse across financial, legal … dimensions").
	Framing string `json:"framing_prompt,omitempty"`
}

// Pattern is a configured execution pattern (seed 001): how it works,
// when to use it, and its bounds.
type Pattern struct {
	Name        string `json:"name"`
	Description string `json:"description"`
	WhenToUse   string `json:"when_to_use,omitempty"`
	// MaxIterations bounds the model turns of one loop: the ReACT loop,
	// or each supervisor lane. Zero leaves the executor's default.
	MaxIterations int `json:"max_iterations,omitempty"`
	// MaxLanes bounds the subagent lanes of one supervisor fan-out.
	MaxLanes int `json:"max_lanes,omitempty"`
	// GroupTimeoutS is the deadline, in seconds, of each fan-out group
	// (parallel steps, supervisor lanes): when it passes, the group is
	// joined with what finished. Zero uses the default (10 minutes).
	GroupTimeoutS int `json:"group_timeout_s,omitempty"`
	// MaxReplans bounds the run's replans (plan-then-execute revisions,
	// ReACT restarts, supervisor re-iterations). Zero uses the default, 3.
	MaxReplans int `json:"max_replans,omitempty"`
	// RunTimeoutS bounds a run's wall time, in seconds: past it the run
	// is stopped and ends TIMEOUT. Zero uses the default (30 minutes).
	RunTimeoutS int `json:"run_timeout_s,omitempty"`
	// GateTTLS is how long, in seconds, an approval or interrupt gate of
	// the run waits for a decision before it expires. Zero uses the
	// default (1 hour); a gate never outlives the run's deadline.
	GateTTLS int `json:"gate_ttl_s,omitempty"`
	// MinConfidence is the confidence a step's answer must state, when it
	// states one, to be accepted: below it the step gets one reflection
	// pass, then the run ends LOW_CONFIDENCE. Zero uses the default, 0.5.
	MinConfidence float64 `json:"min_confidence,omitempty"`
}

// Route is a routing decision: the task type and pattern a run takes.
type Route struct {
	TaskType string `json:"task_type"`
	Pattern  string `json:"pattern"`
	Reason   string `json:"reason"`
	// Clarify, when set, says the task is ambiguous: it is the question
	// to put to the user, and the run ends AMBIGUOUS_INTENT.
	Clarify string `json:"clarify,omitempty"`
}

// Persona is a tenant's soul as a model sees it: who the agent is, what it
// must always do, and how it speaks.
type Persona struct {
	Name         string          `json:"name,omitempty"`
	Instructions string          `json:"instructions,omitempty"`
	Tone         string          `json:"tone,omitempty"`
	Language     string          `json:"language,omitempty"`
	Policies     json.RawMessage `json:"policies,omitempty"`
}

// HistoryMessage is one message of a session's recent conversation. Role
// is user, assistant or summary (the older turns, condensed).
type HistoryMessage struct {
	Role    string `json:"role"`
	Content string `json:"content"`
}

// RecalledMemory is a long-term memory recalled for a run when it
// started: a fact or a past exchange of its tenant, its user or its
// session, most similar to the task. The models see it as data, under
// its id (the memory's key), never as instructions.
type RecalledMemory struct {
	ID    string  `json:"id"`
	Scope string  `json:"scope"`
	Text  string  `json:"text"`
	Score float32 `json:"score"`
}
