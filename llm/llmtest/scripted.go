// Package llmtest holds the scripted model agentbus tests use in place of a
// real one (the only fake the tests allow): canned replies per task or in
// sequence, and a record of every request for assertions on what the
// model was asked.
package llmtest

import (
	"context"
	"fmt"
	"slices"
	"sync"

	json "github.com/go-json-experiment/json/v1"

	"github.com/agentbus/agentbus/llm"
)

// Reply is one canned answer: a response, or an error.
type Reply struct {
	Response llm.Response
	Err      error
}

// Scripted is a model that answers from a script. Replies queued for a
// task with On are used first, in order; then replies queued with Then, in
// order; then Default, if set; otherwise the call fails. The last reply of
// a task queue repeats when Repeat is set.
type Scripted struct {
	// Default answers requests the script has no reply for (for example
	// offline.New(), to script only some tasks); nil fails them.
	Default llm.Model
	// Repeat keeps answering with the last reply of a queue.
	Repeat bool

	mu     sync.Mutex
	byTask map[llm.Task][]Reply
	seq    []Reply
	reqs   []llm.Request
}

// New returns an empty script.
func New() *Scripted { return &Scripted{byTask: map[llm.Task][]Reply{}} }

// Sequence returns a script that answers every request with resps in order.
func Sequence(resps ...llm.Response) *Scripted {
	s := New()
	for _, r := range resps {
		s.seq = append(s.seq, Reply{Response: r})
	}
	return s
}

// On queues replies for requests of task.
func (s *Scripted) On(task llm.Task, replies ...Reply) *Scripted {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.byTask[task] = append(s.byTask[task], replies...)
	return s
}

// Then queues replies for requests of any task, after the task queues.
func (s *Scripted) Then(replies ...Reply) *Scripted {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.seq = append(s.seq, replies...)
	return s
}

// Complete answers req from the script and records it.
func (s *Scripted) Complete(ctx context.Context, req llm.Request) (llm.Response, error) {
	if err := ctx.Err(); err != nil {
		return llm.Response{}, err
	}
	s.mu.Lock()
	s.reqs = append(s.reqs, req)
	r, ok := s.next(req.Task)
	def := s.Default
	s.mu.Unlock()
	if !ok {
		if def != nil {
			return def.Complete(ctx, req)
		}
		return llm.Response{}, fmt.Errorf("llmtest: no scripted reply left for a %s request", req.Task)
	}
	if r.Err != nil {
		return llm.Response{}, r.Err
	}
	resp := r.Response
	if resp.Provider == "" {
		resp.Provider = "scripted"
	}
	if resp.Model == "" {
		resp.Model = "scripted"
	}
	if req.Stream != nil && resp.Message.Content != "" {
		req.Stream(resp.Message.Content)
	}
	return resp, nil
}

func (s *Scripted) next(task llm.Task) (Reply, bool) {
	if q := s.byTask[task]; len(q) > 0 {
		s.byTask[task] = s.pop(q)
		return q[0], true
	}
	if q := s.seq; len(q) > 0 {
		s.seq = s.pop(q)
		return q[0], true
	}
	return Reply{}, false
}

// pop drops the head of q, except the last reply when Repeat is set.
func (s *Scripted) pop(q []Reply) []Reply {
	if len(q) == 1 && s.Repeat {
		return q
	}
	return q[1:]
}

// Requests returns the requests received so far, of every task when tasks
// is empty, else of those tasks only.
func (s *Scripted) Requests(tasks ...llm.Task) []llm.Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []llm.Request
	for _, r := range s.reqs {
		if len(tasks) == 0 || slices.Contains(tasks, r.Task) {
			out = append(out, r)
		}
	}
	return out
}

// Text is a reply whose message is content.
func Text(content string) Reply {
	return Reply{Response: llm.Response{Message: llm.Message{Role: llm.RoleAssistant, Content: content}}}
}

// JSON is a reply whose message is v as JSON.
func JSON(v any) Reply {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return Text(string(b))
}

// ToolCall is a reply that calls tool name with args (JSON).
func ToolCall(id, name, args string) Reply {
	return Reply{Response: llm.Response{Message: llm.Message{Role: llm.RoleAssistant,
		ToolCalls: []llm.ToolCall{{ID: id, Name: name, Arguments: json.RawMessage(args)}}}}}
}

// Fail is a reply that fails with err.
func Fail(err error) Reply { return Reply{Err: err} }

// WithUsage returns r with usage u.
func (r Reply) WithUsage(u llm.Usage) Reply {
	r.Response.Usage = u
	return r
}
