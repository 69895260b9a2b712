package llm_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/agentbus/agentbus/llm"
	"github.com/agentbus/agentbus/llm/llmtest"
	"github.com/agentbus/agentbus/schema"
)

func testCtx(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// script answers with each of answers in turn, the last one repeating,
// each reply using u.
func script(u llm.Usage, answers ...string) *llmtest.Scripted {
	m := llmtest.New()
	m.Repeat = true
	for _, a := range answers {
		m.Then(llmtest.Text(a).WithUsage(u))
	}
	return m
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
			m := script(llm.Usage{InputTokens: 10, OutputTokens: 3, CostUSD: 0.5, Calls: 1}, tc.answers...)
			var out llm.RouteOutput
			req := llm.Request{Task: llm.TaskRoute, Schema: llm.RouteSchema,
				Messages: []llm.Message{{Role: llm.RoleUser, Content: "route this"}}}
			usage, err := llm.Structured(testCtx(t), m, req, &out)
			if !errors.Is(err, tc.wantErr) {
				t.Fatalf("err = %v, want %v", err, tc.wantErr)
			}
			reqs := m.Requests()
			if len(reqs) != tc.wantCalls {
				t.Fatalf("model called %d times, want %d", len(reqs), tc.wantCalls)
			}
			if want := (llm.Usage{InputTokens: 10 * tc.wantCalls, OutputTokens: 3 * tc.wantCalls,
				CostUSD: 0.5 * float64(tc.wantCalls), Calls: tc.wantCalls}); usage != want {
				t.Errorf("usage = %+v, want %+v (summed over every attempt)", usage, want)
			}
			if out.TaskType != tc.wantType {
				t.Errorf("TaskType = %q, want %q", out.TaskType, tc.wantType)
			}
			if len(req.Messages) != 1 {
				t.Errorf("caller's messages were modified: %d", len(req.Messages))
			}
			// Every repair sends the bad answer back with the validation error.
			for i := 1; i < len(reqs); i++ {
				msgs := reqs[i].Messages
				if len(msgs) != 1+2*i {
					t.Fatalf("repair %d has %d messages, want %d", i, len(msgs), 1+2*i)
				}
				bad, ask := msgs[len(msgs)-2], msgs[len(msgs)-1]
				if given := tc.answers[min(i-1, len(tc.answers)-1)]; bad.Role != llm.RoleAssistant || bad.Content != given {
					t.Errorf("repair %d: previous answer not sent back: %+v", i, bad)
				}
				if ask.Role != llm.RoleUser || !strings.Contains(ask.Content, "was rejected") {
					t.Errorf("repair %d: no repair instruction: %+v", i, ask)
				}
			}
		})
	}
}

func TestStructuredModelError(t *testing.T) {
	m := llmtest.New().Then(llmtest.Fail(llm.ErrUnavailable))
	var out llm.RouteOutput
	_, err := llm.Structured(testCtx(t), m, llm.Request{Task: llm.TaskRoute, Schema: llm.RouteSchema}, &out)
	if !errors.Is(err, llm.ErrUnavailable) || errors.Is(err, llm.ErrInvalidOutput) {
		t.Fatalf("err = %v, want the model's error", err)
	}
	if n := len(m.Requests()); n != 1 {
		t.Errorf("model called %d times, want 1 (a model error is not repaired)", n)
	}
}

// TestStructuredCheckRepairsRejectedAnswers: an answer the caller's check
// rejects (a plan naming an unknown skill) is repaired like a schema
// violation, and nothing of the rejected answer survives in out.
func TestStructuredCheckRepairsRejectedAnswers(t *testing.T) {
	first := `{"task_type":"bogus","pattern":"react","reason":"first"}`
	second := `{"task_type":"general","pattern":"react"}`
	m := script(llm.Usage{}, first, second)
	var out llm.RouteOutput
	_, err := llm.StructuredCheck(testCtx(t), m, llm.Request{Task: llm.TaskRoute, Schema: llm.RouteSchema}, &out, func() error {
		if out.TaskType != "general" {
			return errors.New("unknown task type " + out.TaskType)
		}
		return nil
	})
	if err != nil || out.TaskType != "general" || out.Reason != "" {
		t.Fatalf("out = %+v, err = %v; want the second answer alone", out, err)
	}
	reqs := m.Requests()
	if len(reqs) != 2 || !strings.Contains(reqs[1].Messages[len(reqs[1].Messages)-1].Content, "unknown task type bogus") {
		t.Fatalf("the repair turn does not quote the check's error: %+v", reqs)
	}
}

// TestSchemas checks what the structured-output schemas accept.
func TestSchemas(t *testing.T) {
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
		{"answer with confidence", string(llm.ActSchema), `{"status":"complete","label":"x","data":{},"confidence":0.4}`, false},
		{"confidence over 1", string(llm.ActSchema), `{"status":"complete","label":"x","data":{},"confidence":1.5}`, true},
		{"conflict", string(llm.ActSchema), `{"status":"conflict","reason":"the count","conflicts":[{"source":"crm","claim":"12"},{"source":"erp","claim":"14"}]}`, false},
		{"conflict of one source", string(llm.ActSchema), `{"status":"conflict","reason":"the count","conflicts":[{"source":"crm","claim":"12"}]}`, true},
		{"conflict without sources", string(llm.ActSchema), `{"status":"conflict","reason":"the count"}`, true},
		{"conflict without the fact", string(llm.ActSchema), `{"status":"conflict","conflicts":[{"source":"a","claim":"1"},{"source":"b","claim":"2"}]}`, true},
		{"claim without source", string(llm.ActSchema), `{"status":"conflict","reason":"r","conflicts":[{"claim":"1"},{"source":"b","claim":"2"}]}`, true},
		{"plan over 10 steps", string(llm.PlanSchema), `{"steps":[` + strings.Repeat(`{"step":1,"task":"t","skills":["s"],"return_spec":{"shape":{}}},`, 10) +
			`{"step":1,"task":"t","skills":["s"],"return_spec":{"shape":{}}}]}`, true},
		{"plan step without return_spec", string(llm.PlanSchema), `{"steps":[{"step":1,"task":"t","skills":["s"]}]}`, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := schema.Validate([]byte(tc.schema), []byte(tc.data))
			if (err != nil) != tc.wantErr {
				t.Fatalf("err = %v, wantErr %v", err, tc.wantErr)
			}
		})
	}
}
