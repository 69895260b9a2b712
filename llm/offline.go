package llm

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"unicode"
)

// Offline is the deterministic model: it needs no network and no key, and
// it is the embedded default. It routes by word overlap with task-type
// descriptions, plans by chaining skill output schemas to input schemas,
// acts by calling the allowed skill and projecting its output onto the
// return_spec, and synthesises from the step outputs.
type Offline struct{}

// NewOffline returns the offline model.
func NewOffline() *Offline { return &Offline{} }

// Complete answers req according to req.Task.
func (o *Offline) Complete(ctx context.Context, req Request) (Response, error) {
	if err := ctx.Err(); err != nil {
		return Response{}, err
	}
	var (
		msg Message
		err error
	)
	switch in := req.Input.(type) {
	case RouteInput:
		msg, err = jsonMessage(route(in))
	case PlanInput:
		msg, err = jsonMessage(plan(in))
	case ActInput:
		msg, err = act(in, req.Messages)
	case SynthInput:
		msg = Message{Role: RoleAssistant, Content: synthesize(in)}
	case ExtractInput:
		msg, err = extract(in)
	default:
		return Response{}, fmt.Errorf("%w: %s with %T", ErrBadInput, req.Task, req.Input)
	}
	if err != nil {
		return Response{}, err
	}
	return Response{Message: msg, Usage: estimateUsage(req, msg), Model: "offline"}, nil
}

func jsonMessage(v any) (Message, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return Message{}, fmt.Errorf("llm: offline: %w", err)
	}
	return Message{Role: RoleAssistant, Content: string(b)}, nil
}

// estimateUsage counts about four characters per token, so budgets see
// realistic numbers in offline mode.
func estimateUsage(req Request, out Message) Usage {
	in := len(req.System)
	for _, m := range req.Messages {
		in += len(m.Content)
	}
	if b, err := json.Marshal(req.Input); err == nil {
		in += len(b)
	}
	o := len(out.Content)
	for _, c := range out.ToolCalls {
		o += len(c.Arguments) + len(c.Name)
	}
	return Usage{InputTokens: in/4 + 1, OutputTokens: o/4 + 1}
}

func route(in RouteInput) RouteOutput {
	words := wordSet(in.Task)
	best, bestScore := -1, -1.0
	for i, tt := range in.TaskTypes {
		s := overlap(words, wordSet(tt.Name+" "+tt.Description))
		if s > bestScore {
			best, bestScore = i, s
		}
	}
	if best < 0 {
		return RouteOutput{TaskType: "general", Pattern: "react", Reason: "no task types configured"}
	}
	tt := in.TaskTypes[best]
	pattern := "react"
	if len(tt.Patterns) > 0 {
		pattern = tt.Patterns[0]
	}
	return RouteOutput{TaskType: tt.Name, Pattern: pattern,
		Reason: fmt.Sprintf("task type %q shares %.0f words with the task; %q is its first valid pattern", tt.Name, bestScore, pattern)}
}

var stopwords = map[string]bool{
	"the": true, "a": true, "an": true, "and": true, "or": true, "of": true, "to": true, "for": true,
	"by": true, "them": true, "it": true, "in": true, "on": true, "with": true, "their": true, "its": true,
	"is": true, "are": true, "be": true, "all": true, "every": true, "from": true, "me": true, "my": true,
	// Verbs every task uses say nothing about which skill fits.
	"list": true, "show": true, "get": true, "give": true, "return": true, "find": true, "what": true,
}

// words splits s into lower-case stems without stop words.
func words(s string) []string {
	fields := strings.FieldsFunc(strings.ToLower(s), func(r rune) bool {
		return !unicode.IsLetter(r) && !unicode.IsDigit(r)
	})
	out := fields[:0]
	for _, f := range fields {
		if stopwords[f] || len(f) < 2 {
			continue
		}
		out = append(out, stem(f))
	}
	return out
}

func stem(w string) string {
	for _, suf := range []string{"ing", "ies", "es", "s"} {
		if strings.HasSuffix(w, suf) && len(w)-len(suf) >= 3 {
			if suf == "ies" {
				return strings.TrimSuffix(w, suf) + "y"
			}
			return strings.TrimSuffix(w, suf)
		}
	}
	return w
}

func wordSet(s string) map[string]bool {
	set := map[string]bool{}
	for _, w := range words(s) {
		set[w] = true
	}
	return set
}

func overlap(a, b map[string]bool) float64 {
	n := 0.0
	for w := range a {
		if b[w] {
			n++
		}
	}
	return n
}

func sortedNames[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
