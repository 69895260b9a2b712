package llm

import "github.com/agentbus/agentbus/domain"

// The words of the domain vocabulary the model layer speaks; see package
// domain.
type (
	// TaskType is domain.TaskType.
	TaskType = domain.TaskType
	// Pattern is domain.Pattern.
	Pattern = domain.Pattern
	// RouteOutput is the route task's answer: a domain.Route.
	RouteOutput = domain.Route
	// Persona is domain.Persona.
	Persona = domain.Persona
	// HistoryMessage is domain.HistoryMessage.
	HistoryMessage = domain.HistoryMessage
	// RecalledMemory is domain.RecalledMemory.
	RecalledMemory = domain.RecalledMemory
	// Usage is domain.Usage.
	Usage = domain.Usage
	// Call is domain.Call.
	Call = domain.Call
	// Task names what a request asks of the model. Real providers see it
	// only through the prompt; the offline model dispatches on it.
	Task = domain.Task
)

// Model tasks.
const (
	TaskRoute      = domain.TaskRoute
	TaskPlan       = domain.TaskPlan
	TaskAct        = domain.TaskAct
	TaskSynthesize = domain.TaskSynthesize
	TaskExtract    = domain.TaskExtract
	TaskSupervise  = domain.TaskSupervise
	TaskReview     = domain.TaskReview
	TaskClassify   = domain.TaskClassify
	TaskSummarize  = domain.TaskSummarize
)
