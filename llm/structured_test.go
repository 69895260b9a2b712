package llm_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"

	"github.com/agentbus/agentbus/llm"
)

// scripted is a fake model (the only kind of fake agentbus tests allow):
// it answers each call with the next canned content and records requests.
type scripted struct {
	mu      sync.Mutex
	answers []string
	usage   llm.Usage
	reqs    []llm.Request
	given   []string // the answers returned so far
}

func (s *scripted) Complete(_ context.Context, req llm.Request) (llm.Response, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.reqs = append(s.reqs, req)
	if len(s.answers) == 0 {
		return llm.Response{}, errors.New("scripted: no answer left")
	}
	a := s.answers[0]
	if len(s.answers) > 1 {
		s.answers = s.answers[1:]
	}
	s.given = append(s.given, a)
	return llm.Response{Message: llm.Message{Role: llm.RoleAssistant, Content: a}, Usage: s.usage, Model: "scripted"}, nil
}

func TestStructured(t *testing.T) {
	const valid = `{"task_type":"general","pattern":"react","reason":"fits"}`
	cases := []struct {
		name      string
		answers   []string // the last answer repeats
		wantCalls int
		wantErr   error
		wantType  string
	}{
		{"valid first time", []string{valid}, 1, nil, "general"},
		{"code fence stripped", []string{"```json\n" + valid + "\n```"}, 1, nil, "general"},
		{"invalid JSON then valid", []string{`{"task_type": "general", oops`, valid}, 2, nil, "general"},
		{"schema violation then valid", []string{`{"task_type":"general"}`, valid}, 2, nil, "general"},
		{"always invalid", []string{`not json at all`}, llm.MaxRepairs + 1, llm.ErrInvalidOutput, ""},
		{"always schema-invalid", []string{`{"task_type":"","pattern":"react"}`}, llm.MaxRepairs + 1, llm.ErrInvalidOutput, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			m := &scripted{answers: tc.answers, usage: llm.Usage{InputTokens: 10, OutputTokens: 3}}
			var out llm.RouteOutput
			req := llm.Request{Task: llm.TaskRoute, Schema: llm.RouteSchema,
				Messages: []llm.Message{{Role: llm.RoleUser, Content: "route this"}}}
			usage, err := llm.Structured(testCtx(t), m, req, &out)
			if !errors.Is(err, tc.wantErr) {
				t.Fatalf("err = %v, want %v", err, tc.wantErr)
			}
			if len(m.reqs) != tc.wantCalls {
				t.Fatalf("model called %d times, want %d", len(m.reqs), tc.wantCalls)
			}
			if want := (llm.Usage{InputTokens: 10 * tc.wantCalls, OutputTokens: 3 * tc.wantCalls}); usage != want {
				t.Errorf("usage = %+v, want %+v (summed over every attempt)", usage, want)
			}
			if out.TaskType != tc.wantType {
				t.Errorf("TaskType = %q, want %q", out.TaskType, tc.wantType)
			}
			if len(req.Messages) != 1 {
				t.Errorf("caller's messages were modified: %d", len(req.Messages))
			}
			// Every repair sends the bad answer back with the validation error.
			for i := 1; i < len(m.reqs); i++ {
				msgs := m.reqs[i].Messages
				if len(msgs) != 1+2*i {
					t.Fatalf("repair %d has %d messages, want %d", i, len(msgs), 1+2*i)
				}
				bad, ask := msgs[len(msgs)-2], msgs[len(msgs)-1]
				if bad.Role != llm.RoleAssistant || bad.Content != m.given[i-1] {
					t.Errorf("repair %d: previous answer not sent back: %+v", i, bad)
				}
				if ask.Role != llm.RoleUser || !strings.Contains(ask.Content, "did not match the required JSON schema") {
					t.Errorf("repair %d: no repair instruction: %+v", i, ask)
				}
			}
		})
	}
}

func TestStructuredModelError(t *testing.T) {
	m := &scripted{} // no answers: every call fails
	var out llm.RouteOutput
	_, err := llm.Structured(testCtx(t), m, llm.Request{Task: llm.TaskRoute, Schema: llm.RouteSchema}, &out)
	if err == nil || errors.Is(err, llm.ErrInvalidOutput) {
		t.Fatalf("err = %v, want the model's error", err)
	}
	if len(m.reqs) != 1 {
		t.Errorf("model called %d times, want 1 (a model error is not repaired)", len(m.reqs))
	}
}

func TestValidateJSON(t *testing.T) {
	cases := []struct {
		name    string
		schema  string
		data    string
		wantErr bool
	}{
		{"valid act answer", string(llm.ActSchema), `{"status":"complete","label":"outlet_ids","data":{}}`, false},
		{"bad status", string(llm.ActSchema), `{"status":"done"}`, true},
		{"bad label", string(llm.ActSchema), `{"status":"complete","label":"../x"}`, true},
		{"not JSON", string(llm.ActSchema), `{`, true},
		{"plan over 10 steps", string(llm.PlanSchema), `{"steps":[` + strings.Repeat(`{"step":1,"task":"t","skills":["s"],"return_spec":{"shape":{}}},`, 10) +
			`{"step":1,"task":"t","skills":["s"],"return_spec":{"shape":{}}}]}`, true},
		{"plan step without return_spec", string(llm.PlanSchema), `{"steps":[{"step":1,"task":"t","skills":["s"]}]}`, true},
		{"bad schema", `{"type":42}`, `{}`, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := llm.ValidateJSON([]byte(tc.schema), []byte(tc.data))
			if (err != nil) != tc.wantErr {
				t.Fatalf("err = %v, wantErr %v", err, tc.wantErr)
			}
		})
	}
}
