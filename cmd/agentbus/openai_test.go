package main

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	json "github.com/go-json-experiment/json/v1"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/packages/param"

	"github.com/agentbus/agentbus/orch"
	"github.com/agentbus/agentbus/store"
)

// TestOpenAICompatibleChat drives /v1/chat/completions of an all-in-one
// with the official openai-go client, unmodified: a completion answers
// the demo task as POST /agent/run does; a streamed one sends the run's
// progress as reasoning_content, the answer as content, finish_reason stop
// and the usage; a run parked at a gate (a network call, gated by
// default) answers with how to decide it; /v1/models lists the default model; a chat whose last message is
// not the user's is a 400 with a stable code.
func TestOpenAICompatibleChat(t *testing.T) {
	s := startStack(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	client := openai.NewClient(option.WithBaseURL("http://"+s.IngressAddr+"/v1/"), option.WithAPIKey("unused-in-open-mode"),
		option.WithHeader("X-Tenant-Id", "demo"), option.WithMaxRetries(0))
	want := expectedRanking(t, s.SkillsURL, "demo")
	task := openai.ChatCompletionNewParams{Model: "agentbus",
		Messages: []openai.ChatCompletionMessageParamUnion{openai.SystemMessage("You are terse."), openai.UserMessage(demoTask)}}

	done, err := client.Chat.Completions.New(ctx, task)
	if err != nil {
		t.Fatal(err)
	}
	if len(done.Choices) != 1 || done.Choices[0].FinishReason != "stop" || done.Choices[0].Message.Role != "assistant" ||
		!strings.HasPrefix(done.ID, "chatcmpl-") || done.Model != "agentbus" {
		t.Fatalf("completion %+v", done)
	}
	assertRanked(t, done.Choices[0].Message.Content, want)
	if run := done.JSON.ExtraFields["agentbus"].Raw(); !strings.Contains(run, `"terminal_code":"SUCCESS"`) ||
		!strings.Contains(run, `"run_id":"`+strings.TrimPrefix(done.ID, "chatcmpl-")+`"`) {
		t.Fatalf("agentbus run %s", run)
	}

	stream := client.Chat.Completions.NewStreaming(ctx, openai.ChatCompletionNewParams{Model: "agentbus",
		Messages:      []openai.ChatCompletionMessageParamUnion{openai.UserMessage(demoTask)},
		StreamOptions: openai.ChatCompletionStreamOptionsParam{IncludeUsage: param.NewOpt(true)}})
	var acc openai.ChatCompletionAccumulator
	var reasoning strings.Builder
	chunks := 0
	for stream.Next() {
		c := stream.Current()
		acc.AddChunk(c)
		chunks++
		if len(c.Choices) > 0 {
			if r := c.Choices[0].Delta.JSON.ExtraFields["reasoning_content"]; r.Raw() != "" {
				var line string
				if err := json.Unmarshal([]byte(r.Raw()), &line); err == nil {
					reasoning.WriteString(line)
				}
			}
		}
	}
	if err := stream.Err(); err != nil {
		t.Fatal(err)
	}
	if len(acc.Choices) != 1 || acc.Choices[0].FinishReason != "stop" || chunks < 3 {
		t.Fatalf("streamed %d chunks into %+v", chunks, acc.ChatCompletion)
	}
	assertRanked(t, acc.Choices[0].Message.Content, want)
	if r := reasoning.String(); !strings.Contains(r, "routed: task type") || !strings.Contains(r, "step_1 started") {
		t.Fatalf("the stream's progress: %q", r)
	}

	// A stack whose outlet_list reaches the open world: by default its
	// calls wait at a gate, and the answer says how to decide it.
	gs, _ := startStackWith(t, networkOutlets)
	gatedClient := openai.NewClient(option.WithBaseURL("http://"+gs.IngressAddr+"/v1/"), option.WithAPIKey("unused-in-open-mode"),
		option.WithHeader("X-Tenant-Id", "demo"), option.WithMaxRetries(0))
	gated, err := gatedClient.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{Model: "agentbus",
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage(demoTask)}})
	if err != nil {
		t.Fatal(err)
	}
	if c := gated.Choices[0].Message.Content; !strings.Contains(c, "waits at gate") || !strings.Contains(c, "outlet_list (network)") ||
		!strings.Contains(c, "/approvals/") || !strings.Contains(gated.JSON.ExtraFields["agentbus"].Raw(), `"status":"awaiting_gate"`) {
		t.Fatalf("gated answer %q %s", c, gated.JSON.ExtraFields["agentbus"].Raw())
	}

	// An agent of the tenant is a model: listed, and a chat naming it runs
	// as the agent.
	analyst := createAgent(t, "http://"+s.IngressAddr, "demo",
		`{"name":"Analyst","system_prompt":"Rank outlets.","tools":["outlet_list","engagement_analytics"]}`)
	models, err := client.Models.List(ctx)
	if err != nil || len(models.Data) != 2 || models.Data[0].ID != "agentbus" || models.Data[1].ID != analyst || models.Data[1].OwnedBy != "demo" {
		t.Fatalf("models %+v, %v", models, err)
	}
	asAgent, err := client.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{Model: analyst,
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage(demoTask)}})
	if err != nil {
		t.Fatal(err)
	}
	assertRanked(t, asAgent.Choices[0].Message.Content, want)
	runID := strings.TrimPrefix(asAgent.ID, "chatcmpl-")
	eventually(t, 10*time.Second, "the run's agent in its trace", func() bool {
		evs, _ := s.Deps.Store.Trace(ctx, store.TraceQuery{TenantID: "demo", PlanID: orch.PlanID(runID)})
		for _, e := range evs {
			if e.EventType == "agent.selected" && strings.Contains(string(e.Payload), `"agent_id":"`+analyst+`"`) {
				return true
			}
		}
		return false
	})

	_, err = client.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{Model: "agentbus",
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hi"), openai.AssistantMessage("hello")}})
	var apiErr *openai.Error
	if !errors.As(err, &apiErr) || apiErr.StatusCode != 400 || apiErr.Code != "invalid_request" || !strings.Contains(apiErr.Message, "last message") {
		t.Fatalf("a chat ending with the assistant: %v", err)
	}
	_, err = client.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{Model: "no-such-agent",
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage(demoTask)}})
	if !errors.As(err, &apiErr) || apiErr.StatusCode != 400 || apiErr.Code != "unknown_agent" {
		t.Fatalf("an unknown model: %v", err)
	}
}

// TestOpenAIPythonSDK: the official openai Python package, unmodified
// (deploy/pyclients/setup.sh installs it), completes and streams a chat
// against an all-in-one, and reads a refusal as its BadRequestError with
// the stable code.
func TestOpenAIPythonSDK(t *testing.T) {
	python := pyclients(t)
	s := startStack(t)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	out := runPython(t, ctx, nil, python, "openai_sdk_check.py", "http://"+s.IngressAddr+"/v1", "demo", demoTask)
	var got struct {
		Completion struct {
			Answer string `json:"answer"`
			Finish string `json:"finish_reason"`
			Run    struct {
				TerminalCode string `json:"terminal_code"`
			} `json:"run"`
		} `json:"completion"`
		Stream struct {
			Answer   string `json:"answer"`
			Finish   string `json:"finish_reason"`
			Chunks   int    `json:"chunks"`
			Progress string `json:"progress"`
			Usage    *struct {
				TotalTokens int `json:"total_tokens"`
			} `json:"usage"`
		} `json:"stream"`
		Refused *struct {
			Status int    `json:"status"`
			Code   string `json:"code"`
		} `json:"refused"`
	}
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	want := expectedRanking(t, s.SkillsURL, "demo")
	assertRanked(t, got.Completion.Answer, want)
	assertRanked(t, got.Stream.Answer, want)
	if got.Completion.Finish != "stop" || got.Completion.Run.TerminalCode != "SUCCESS" || got.Stream.Finish != "stop" ||
		got.Stream.Chunks < 3 || got.Stream.Usage == nil || !strings.Contains(got.Stream.Progress, "step_2 started") {
		t.Fatalf("the SDK saw %s", out)
	}
	if got.Refused == nil || got.Refused.Status != 400 || got.Refused.Code != "invalid_request" {
		t.Fatalf("a chat ending with the assistant: %s", out)
	}
}
