package skills_test

import (
	"context"
	"errors"
	"log/slog"
	"net/http/httptest"
	"strings"
	"testing"

	json "github.com/go-json-experiment/json/v1"
	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/agentbus/agentbus/skills"
)

// A server's question during a call fails the call with the question when
// the call has no answer for it, and is answered when it has: over every
// transport of the reference server (which asks with elicitation/create
// on the call's stream, or on stdio's one stream).
func TestElicitation_EverythingAsksAndGetsTheRecordedAnswer(t *testing.T) {
	for name, cfg := range everythingConfigs(t) {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			c := newClient(t, cfg(t))
			ctx := testCtx(t)
			const tool = "trigger-elicitation-request"
			if name == skills.TransportSSE {
				// The legacy SSE transport takes no server requests, so the
				// client does not declare elicitation, and the server does
				// not offer its eliciting tool.
				if _, err := c.Call(ctx, "t1", tool, nil, ""); !errors.Is(err, skills.ErrSkillNotFound) {
					t.Fatalf("SSE: %s = %v, want not offered", tool, err)
				}
				return
			}

			// Without an Elicitor the question is declined.
			out, err := c.Call(ctx, "t1", tool, nil, "")
			if err != nil || !strings.Contains(string(out), "declined") {
				t.Fatalf("call without an elicitor = %s, %v; want the tool to see a decline", out, err)
			}

			e := skills.NewElicitor(nil)
			_, err = c.Call(skills.WithElicitor(ctx, e), "t1", tool, nil, "k1")
			var ee *skills.ElicitationError
			if !errors.As(err, &ee) || !errors.Is(err, skills.ErrElicitation) {
				t.Fatalf("call with no answer: err = %v, want an ElicitationError", err)
			}
			q := ee.Elicitation
			if !strings.Contains(q.Message, "Please provide inputs") || q.Question == "" {
				t.Fatalf("question = %+v", q)
			}
			var shape struct {
				Properties map[string]json.RawMessage `json:"properties"`
				Required   []string                   `json:"required"`
			}
			if json.Unmarshal(q.Schema, &shape) != nil || shape.Properties["name"] == nil || !contains(shape.Required, "name") {
				t.Fatalf("requested schema = %s", q.Schema)
			}

			answer := skills.Answer{Question: q.Question, Content: json.RawMessage(`{"name":"Ada Lovelace","check":true,"integer":7}`)}
			out, err = c.Call(skills.WithElicitor(ctx, skills.NewElicitor([]skills.Answer{answer})), "t1", tool, nil, "k2")
			if err != nil {
				t.Fatalf("call with the answer: %v", err)
			}
			for _, want := range []string{"Name: Ada Lovelace", "Agreed to terms: true", "Favorite Integer: 7"} {
				if !strings.Contains(string(out), want) {
					t.Fatalf("result = %s, want %q", out, want)
				}
			}

			// An answer to another question is not given to this one.
			other := skills.Answer{Question: "0123456789abcdef", Content: json.RawMessage(`{"name":"Eve"}`)}
			_, err = c.Call(skills.WithElicitor(ctx, skills.NewElicitor([]skills.Answer{other})), "t1", tool, nil, "k3")
			if !errors.As(err, &ee) || ee.Elicitation.Question != q.Question {
				t.Fatalf("call with another question's answer: err = %v, want the question asked again", err)
			}
		})
	}
}

// A server that asks with multi round-trip requests (an "input required"
// result, answered by the call's retry) is answered from the Elicitor
// too, in order, one question after the other.
func TestElicitation_TwoQuestionsInOrder(t *testing.T) {
	s := server.NewMCPServer("booking", "1.0.0", server.WithToolCapabilities(false), server.WithElicitation())
	form := func(msg string) mcp.ElicitationParams {
		return mcp.ElicitationParams{Message: msg, RequestedSchema: map[string]any{"type": "object",
			"properties": map[string]any{"value": map[string]any{"type": "string"}}, "required": []string{"value"}}}
	}
	s.AddTool(mcp.NewTool("book", mcp.WithDescription("Book a table, asking the guest's name and time")),
		func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			// The answers so far travel in the request state.
			answers := map[string]string{}
			_ = json.Unmarshal([]byte(req.Params.RequestState), &answers)
			for id, r := range req.Params.InputResponses {
				if err := r.DecodeFor(mcp.MethodElicitationCreate); err != nil || r.Elicitation == nil || r.Elicitation.Action != mcp.ElicitationResponseActionAccept {
					return mcp.NewToolResultError("no booking: the guest did not answer"), nil
				}
				content, _ := r.Elicitation.Content.(map[string]any)
				answers[id], _ = content["value"].(string)
			}
			for _, id := range []string{"name", "time"} {
				if _, ok := answers[id]; !ok {
					state, _ := json.Marshal(answers)
					return server.NewInputRequestBuilder(string(state)).Elicit(id, form("The guest's "+id+"?")).ToolResult(), nil
				}
			}
			return mcp.NewToolResultText("booked for " + answers["name"] + " at " + answers["time"]), nil
		})
	srv := httptest.NewServer(server.NewStreamableHTTPServer(s, server.WithStreamableHTTPLogger(slog.New(slog.DiscardHandler))))
	t.Cleanup(srv.Close)
	c := newClient(t, skills.Config{URL: srv.URL + "/mcp", Mode: skills.ModePlain})
	ctx := testCtx(t)

	var answers []skills.Answer
	for _, value := range []string{"Ada", "19:30"} {
		_, err := c.Call(skills.WithElicitor(ctx, skills.NewElicitor(answers)), "t1", "book", nil, "")
		var ee *skills.ElicitationError
		if !errors.As(err, &ee) {
			t.Fatalf("with %d answers: err = %v, want the next question", len(answers), err)
		}
		answers = append(answers, skills.Answer{Question: ee.Elicitation.Question, Content: json.RawMessage(`{"value":"` + value + `"}`)})
	}
	out, err := c.Call(skills.WithElicitor(ctx, skills.NewElicitor(answers)), "t1", "book", nil, "")
	if err != nil || !strings.Contains(string(out), "booked for Ada at 19:30") {
		t.Fatalf("with both answers = %s, %v", out, err)
	}
}
