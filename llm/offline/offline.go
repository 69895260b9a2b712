package offline

import (
	"context"
	"fmt"
	"sort"
	"strings"

	json "github.com/go-json-experiment/json/v1"

	"github.com/agentbus/agentbus/fault"
	"github.com/agentbus/agentbus/llm"
	"github.com/agentbus/agentbus/text"
)

// Model is the deterministic model: it needs no network and no key, and
// it is the embedded default. It routes by word overlap with task-type
// descriptions, plans by chaining skill output schemas to input schemas,
// acts by calling the allowed skill and projecting its output onto the
// return_spec, and synthesises from the step outputs. What a task says of
// the user's things ("my home city") it resolves with the recalled facts
// that state them (recallTask).
type Model struct {
	attempts attempts
}

// New returns the offline model.
func New() *Model { return &Model{} }

// Offline reports that this is the offline model (llm.IsOffline).
func (o *Model) Offline() bool { return true }

// Complete answers req according to req.Task. An error it returns, but
// for its context's, is permanent (fault.Permanent): the model has no
// state a retry could change.
func (o *Model) Complete(ctx context.Context, req llm.Request) (llm.Response, error) {
	if err := ctx.Err(); err != nil {
		return llm.Response{}, err
	}
	var (
		msg llm.Message
		err error
	)
	switch in := req.Input.(type) {
	case llm.RouteInput:
		msg, err = jsonMessage(route(in))
	case llm.PlanInput:
		in.Task, _ = recallTask(in.Task, in.Memories)
		msg, err = jsonMessage(plan(in))
	case llm.ActInput:
		in.Task, _ = recallTask(in.Task, in.Memories)
		msg, err = act(in, req.Messages)
	case llm.SynthInput:
		msg = llm.Message{Role: llm.RoleAssistant, Content: synthesizeRecalling(in)}
	case llm.ExtractInput:
		msg, err = o.extract(in)
	case llm.ClassifyInput:
		msg, err = jsonMessage(classify(in))
	case llm.SuperviseInput:
		in.Task, _ = recallTask(in.Task, in.Memories)
		msg, err = jsonMessage(supervise(in))
	case llm.ReviewInput:
		msg, err = jsonMessage(review(in))
	case llm.SummarizeInput:
		msg = llm.Message{Role: llm.RoleAssistant, Content: llm.ExtractiveSummary(in)}
	default:
		return llm.Response{}, fmt.Errorf("%w: %s with %T", llm.ErrBadInput, req.Task, req.Input)
	}
	if err != nil {
		// The model is a function of its request: the same request fails
		// the same way, so no retry can change it.
		return llm.Response{}, fault.Permanent(err)
	}
	if req.MaxTokens > 0 && len(msg.Content)/4+1 > req.MaxTokens {
		// Like a real model at its output limit: the answer is cut.
		msg.Content = msg.Content[:max(req.MaxTokens-1, 0)*4]
	}
	if req.Stream != nil && msg.Content != "" {
		streamChunks(msg.Content, req.Stream)
	}
	return llm.Response{Message: msg, Usage: estimateUsage(req, msg), Model: "offline", Provider: "offline"}, nil
}

// streamChunks hands text to stream a line at a time, so the streaming
// path is exercised by default, with no network.
func streamChunks(text string, stream func(string)) {
	for len(text) > 0 {
		i := strings.IndexByte(text, '\n')
		if i < 0 {
			i = len(text) - 1
		}
		stream(text[:i+1])
		text = text[i+1:]
	}
}

func jsonMessage(v any) (llm.Message, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return llm.Message{}, fmt.Errorf("offline: %w", err)
	}
	return llm.Message{Role: llm.RoleAssistant, Content: string(b)}, nil
}

// estimateUsage counts about four characters per token, so budgets see
// realistic numbers in offline mode.
func estimateUsage(req llm.Request, out llm.Message) llm.Usage {
	o := len(out.Content)
	for _, c := range out.ToolCalls {
		o += len(c.Arguments) + len(c.Name)
	}
	return llm.Usage{InputTokens: llm.EstimateInputTokens(req), OutputTokens: o/4 + 1}
}

// routeShare is the relevance another task type needs, against the
// ideal, to take a task from the first (the general one): a word or two
// in passing ("across") is not a framing.
const routeShare = 0.06

// route picks the first task type (the general one) unless the task
// matches none of its words and another type's name and description
// clearly (BM25, without synonyms), and that type's first pattern.
func route(in llm.RouteInput) llm.RouteOutput {
	if len(in.TaskTypes) == 0 {
		return llm.RouteOutput{TaskType: "general", Pattern: "react", Reason: "no task types configured"}
	}
	docs := make([][]text.Field, len(in.TaskTypes))
	for i, tt := range in.TaskTypes {
		docs[i] = []text.Field{{Text: tt.Name, Weight: 2}, {Text: tt.Description, Weight: 1}}
	}
	scores := text.NewExactCorpus(docs).Scores(strings.Join(words(in.Task), " "))
	best := 0
	for i, s := range scores {
		if scores[0] == 0 && s > scores[best] && s >= routeShare {
			best = i
		}
	}
	tt := in.TaskTypes[best]
	pattern := "react"
	if len(tt.Patterns) > 0 {
		pattern = tt.Patterns[0]
	}
	return llm.RouteOutput{TaskType: tt.Name, Pattern: pattern,
		Reason: fmt.Sprintf("task type %q matches the task best (relevance %.2f); %q is its first valid pattern", tt.Name, scores[best], pattern)}
}

// classify picks the sub-agent whose name and description share the
// most words with the message (the first on a tie or no overlap).
func classify(in llm.ClassifyInput) llm.ClassifyOutput {
	if len(in.Agents) == 0 {
		return llm.ClassifyOutput{Reason: "no sub-agent to choose"}
	}
	scores := agentScores(in.Agents, in.Message)
	best := 0
	for i, s := range scores {
		if s > scores[best] {
			best = i
		}
	}
	a := in.Agents[best]
	return llm.ClassifyOutput{AgentID: a.ID,
		Reason: fmt.Sprintf("agent %q matches the message best (relevance %.2f)", a.Name, scores[best])}
}

// agentScores are how well each agent's name and description fit s.
func agentScores(agents []llm.AgentOption, s string) []float64 {
	docs := make([][]text.Field, len(agents))
	for i, a := range agents {
		docs[i] = []text.Field{{Text: a.Name, Weight: 2}, {Text: a.Description, Weight: 1}}
	}
	return text.NewExactCorpus(docs).Scores(strings.Join(words(s), " "))
}

// verbs every task uses say nothing about which skill or task type fits;
// they are dropped on top of the tokenizer's own stopwords.
var verbs = map[string]bool{
	"list": true, "show": true, "get": true, "give": true, "return": true, "find": true, "what": true,
}

// words tokenizes s for word overlap, without the common verbs.
func words(s string) []string { return text.Tokens(s, verbs) }

func sortedNames[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
