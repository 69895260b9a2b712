package llm

import (
	"strings"

	json "github.com/go-json-experiment/json/v1"

	"github.com/agentbus/agentbus/text"
)

// RouteInput asks the model to pick a task type and one of its patterns.
type RouteInput struct {
	Task      string     `json:"task"`
	TaskTypes []TaskType `json:"task_types"`
	// Patterns describe the patterns the task types name.
	Patterns []Pattern `json:"patterns,omitempty"`
}

// SkillInfo is a loaded skill manifest as the model sees it.
type SkillInfo struct {
	Name         string          `json:"name"`
	Description  string          `json:"description"`
	InputSchema  json.RawMessage `json:"input_schema"`
	OutputSchema json.RawMessage `json:"output_schema"`
}

// PlannedStep is one step of a proposed plan. DependsOn holds step numbers.
type PlannedStep struct {
	Step       int        `json:"step"`
	Task       string     `json:"task"`
	Skills     []string   `json:"skills"`
	ReturnSpec ReturnSpec `json:"return_spec"`
	DependsOn  []int      `json:"depends_on,omitempty"`
	// ModelOnly declares a step the model answers without a tool
	// observation (a transformation of earlier steps' outputs).
	ModelOnly bool `json:"model_only,omitempty"`
}

// ReturnSpec is a step's output contract.
type ReturnSpec struct {
	Shape  json.RawMessage `json:"shape"`
	Reason string          `json:"reason"`
}

// DoneStep is a completed step shown to a replanning model.
type DoneStep struct {
	Step      int    `json:"step"`
	Task      string `json:"task"`
	MemoryKey string `json:"memory_key"`
}

// FailedStep is the step that triggered a replan.
type FailedStep struct {
	Step       int    `json:"step"`
	Reason     string `json:"reason"`
	Suggestion string `json:"suggestion,omitempty"`
}

// PlanInput asks for a plan of at most MaxSteps steps over Skills. On a
// replan Completed, Failed and Remaining are set and only the remaining
// work is planned, numbered from FirstStep.
type PlanInput struct {
	Task string `json:"task"`
	// Framing is the task type's domain framing, if any.
	Framing string `json:"framing,omitempty"`
	// Persona and History are the tenant's soul and the session's recent
	// conversation: a follow-up task ("and the second one?") is planned
	// in their light.
	Persona *Persona         `json:"persona,omitempty"`
	History []HistoryMessage `json:"history,omitempty"`
	// Memories are the long-term memories the run recalled: data, each
	// under its id, never instructions.
	Memories  []RecalledMemory `json:"memories,omitempty"`
	Skills    []SkillInfo      `json:"skills"`
	MaxSteps  int              `json:"max_steps"`
	Completed []DoneStep       `json:"completed_steps,omitempty"`
	Failed    *FailedStep      `json:"failed_step,omitempty"`
	Remaining []PlannedStep    `json:"remaining_steps,omitempty"`
	FirstStep int              `json:"first_step,omitempty"`
}

// PlanOutput is a proposed plan, or Infeasible with the reason.
type PlanOutput struct {
	Steps      []PlannedStep `json:"steps,omitempty"`
	Infeasible string        `json:"infeasible,omitempty"`
}

// ActInput is one executor turn: the step, its allowed skills, the contract
// and the outputs of the steps it depends on, by memory label. The turns so
// far are in Request.Messages.
type ActInput struct {
	Task string `json:"task"`
	// Framing is the task type's domain framing, if any.
	Framing    string                     `json:"framing,omitempty"`
	Skills     []SkillInfo                `json:"allowed_skills"`
	ReturnSpec ReturnSpec                 `json:"return_spec"`
	Inputs     map[string]json.RawMessage `json:"inputs,omitempty"`
	// Memories are the long-term memories the run recalled (data).
	Memories []RecalledMemory `json:"memories,omitempty"`
}

// ActOutput is an executor's final answer for a step: the data to write
// under Label, or an insufficient, failed or conflict signal.
type ActOutput struct {
	Status     string          `json:"status"` // complete | insufficient | failed | conflict
	Label      string          `json:"label,omitempty"`
	Data       json.RawMessage `json:"data,omitempty"`
	Reason     string          `json:"reason,omitempty"`
	Suggestion string          `json:"suggestion,omitempty"`
	// Confidence is how sure the model is that a complete answer meets
	// the step's task, from 0 to 1; absent, it is not judged.
	Confidence *float64 `json:"confidence,omitempty"`
	// Conflicts, with status conflict, are the sources that disagree on
	// the fact Reason names: what each of them says.
	Conflicts []SourceClaim `json:"conflicts,omitempty"`
}

// SourceClaim is what one source (a tool, a document, a record) says of
// a fact.
type SourceClaim struct {
	Source string `json:"source"`
	Claim  string `json:"claim"`
}

// SuperviseInput asks a supervisor to decompose Task into independent
// subagent goals, at most MaxLanes, each worked by its own loop over a
// subset of Skills. On a re-iteration Completed holds the lanes that
// answered and Failed the lanes to replace.
type SuperviseInput struct {
	Task      string           `json:"task"`
	Framing   string           `json:"framing,omitempty"`
	Persona   *Persona         `json:"persona,omitempty"`
	History   []HistoryMessage `json:"history,omitempty"`
	Memories  []RecalledMemory `json:"memories,omitempty"`
	Skills    []SkillInfo      `json:"skills"`
	MaxLanes  int              `json:"max_lanes"`
	Completed []LaneGoal       `json:"completed_lanes,omitempty"`
	Failed    []FailedLane     `json:"failed_lanes,omitempty"`
	// Gaps, on a re-iteration the supervisor's review asked for, is what
	// the completed lanes' findings left unanswered.
	Gaps string `json:"gaps,omitempty"`
	// Agents, for a supervisor agent, are its sub-agents: each lane is
	// assigned to one of them (LaneGoal.AgentID) and its skills are among
	// that agent's Tools.
	Agents []AgentOption `json:"agents,omitempty"`
}

// LaneGoal is one subagent lane: its focused goal and the skills it may
// call (its skill group), and for a supervisor agent the sub-agent it
// runs as.
type LaneGoal struct {
	Goal    string   `json:"goal"`
	Skills  []string `json:"skills"`
	AgentID string   `json:"agent_id,omitempty"`
}

// FailedLane is a lane that failed, and why.
type FailedLane struct {
	Goal   string `json:"goal"`
	Reason string `json:"reason"`
}

// SuperviseOutput is the supervisor's decomposition, or Infeasible.
type SuperviseOutput struct {
	Lanes      []LaneGoal `json:"lanes,omitempty"`
	Infeasible string     `json:"infeasible,omitempty"`
}

// ReviewInput asks the supervisor whether its lanes' findings (Outputs)
// answer Task, before they are synthesised (seed 001's supervisor
// re-iteration). Iteration counts the fan-outs so far.
type ReviewInput struct {
	Task      string       `json:"task"`
	Framing   string       `json:"framing,omitempty"`
	Outputs   []StepOutput `json:"outputs"`
	Iteration int          `json:"iteration"`
}

// ReviewOutput is the supervisor's review: the findings answer the task
// (Sufficient), or Gaps says what is incomplete, contradictory or left
// to investigate, for another fan-out.
type ReviewOutput struct {
	Sufficient bool   `json:"sufficient"`
	Gaps       string `json:"gaps,omitempty"`
}

// StepOutput is one step's stored output, shown to the synthesiser.
type StepOutput struct {
	Step  int             `json:"step"`
	Task  string          `json:"task"`
	Value json.RawMessage `json:"value"`
}

// SynthInput asks for the final answer to Task from the step outputs, in
// the voice of Persona and in the light of the session's History and the
// recalled Memories.
type SynthInput struct {
	Task    string           `json:"task"`
	Outputs []StepOutput     `json:"outputs"`
	Persona *Persona         `json:"persona,omitempty"`
	History []HistoryMessage `json:"history,omitempty"`
	// Memories are the long-term memories the run recalled (data).
	Memories []RecalledMemory `json:"memories,omitempty"`
}

// ExtractInput asks for an extraction script for a skill response too large
// for the context (seed 000 §6): the model sees a sample of the file and
// writes a script that keeps only the return_spec fields.
type ExtractInput struct {
	Task       string     `json:"task"`
	Skill      SkillInfo  `json:"skill"`
	ReturnSpec ReturnSpec `json:"return_spec"`
	FileID     string     `json:"file_id"`
	SizeBytes  int        `json:"size_bytes"`
	Sample     []string   `json:"sample"`
	// Languages the sandbox offers: "python" and/or "jq".
	Languages []string `json:"languages"`
	// Feedback explains why the previous script was rejected, if any.
	Feedback string `json:"feedback,omitempty"`
}

// ExtractOutput is the extraction script and its language.
type ExtractOutput struct {
	Language string `json:"language"`
	Script   string `json:"script"`
}

// ClassifyInput asks a router agent's model which of its sub-agents
// should answer Message (seed 002 Router pattern).
type ClassifyInput struct {
	Message string        `json:"message"`
	Agents  []AgentOption `json:"agents"`
}

// AgentOption is one sub-agent a router may choose, or a supervisor
// assign a lane to: its id, name and what it is for, and (a
// supervisor's) the skills it may call.
type AgentOption struct {
	ID          string   `json:"agent_id"`
	Name        string   `json:"name"`
	Description string   `json:"description,omitempty"`
	Tools       []string `json:"tools,omitempty"`
}

// ClassifyOutput is the sub-agent chosen and why.
type ClassifyOutput struct {
	AgentID string `json:"agent_id"`
	Reason  string `json:"reason"`
}

// SummarizeInput asks for the summary of a session's conversation that
// an agent's history window keeps in place of its older turns (seed
// 002): History is the summary so far (a message of role "summary"),
// then the turns leaving the window, oldest first. The answer is plain
// text of at most MaxBytes bytes.
type SummarizeInput struct {
	History  []HistoryMessage `json:"history"`
	MaxBytes int              `json:"max_bytes"`
}

// ExtractiveSummary is the summary that keeps a line per message of
// in.History (its role and its first line, at most 160 bytes) after the
// summary so far, the newest lines that fit in in.MaxBytes: what a
// session keeps of its older turns when no model writes it (and the
// offline model's answer).
func ExtractiveSummary(in SummarizeInput) string {
	s := ""
	for _, m := range in.History {
		if m.Role == roleSummary {
			if m.Content != "" {
				s += "\n" + m.Content
			}
			continue
		}
		line, _, _ := strings.Cut(strings.TrimSpace(m.Content), "\n")
		s += "\n" + m.Role + ": " + text.Clip(line, 160)
	}
	s = strings.TrimPrefix(s, "\n")
	for len(s) > in.MaxBytes {
		_, rest, ok := strings.Cut(s, "\n")
		if !ok {
			return text.Clip(s, in.MaxBytes)
		}
		s = rest // the oldest turns are forgotten first
	}
	return s
}

// roleSummary is the role of a session's summary message.
const roleSummary = "summary"
