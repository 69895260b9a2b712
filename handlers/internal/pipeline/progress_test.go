package pipeline

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	json "github.com/go-json-experiment/json/v1"
	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/agentbus/agentbus/events"
	"github.com/agentbus/agentbus/handlers"
	"github.com/agentbus/agentbus/handlers/internal/handlerstest"
	"github.com/agentbus/agentbus/handlers/router"
	"github.com/agentbus/agentbus/llm"
	"github.com/agentbus/agentbus/llm/llmtest"
	"github.com/agentbus/agentbus/llm/offline"
	"github.com/agentbus/agentbus/orch"
	"github.com/agentbus/agentbus/runclient"
	"github.com/agentbus/agentbus/skills"
)

// longJob is a plain MCP server whose export_report tool reports three
// steps of progress (notifications/progress) to a call that asks.
func longJob(t *testing.T) *skills.Client {
	t.Helper()
	s := server.NewMCPServer("reports", "1.0.0", server.WithToolCapabilities(false))
	s.AddTool(mcp.NewTool("export_report", mcp.WithDescription("Export the outlet's monthly report"),
		mcp.WithToolAnnotation(mcp.ToolAnnotation{ReadOnlyHint: mcp.ToBoolPtr(true), OpenWorldHint: mcp.ToBoolPtr(false)})),
		func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			if req.Params.Meta != nil && req.Params.Meta.ProgressToken != nil {
				for i := 1; i <= 3; i++ {
					// Spaced, as a long job's pages are: mcp-go's server
					// forwards notifications sent at once out of order.
					time.Sleep(20 * time.Millisecond)
					_ = server.ServerFromContext(ctx).SendNotificationToClient(ctx, string(mcp.MethodNotificationProgress), map[string]any{
						"progressToken": req.Params.Meta.ProgressToken, "progress": i, "total": 3, "message": fmt.Sprintf("page %d", i)})
				}
				time.Sleep(20 * time.Millisecond)
			}
			return mcp.NewToolResultText("exported"), nil
		})
	return plainClient(t, s)
}

// TestStreaming_ToolProgressChunksOnTheReplyStream: in a run that asked to
// stream, a skill's progress reports reach reply.<tenant>.<session> as
// tool_progress chunks, in order, one message per call that the last
// chunk ends, naming the run, the step and the skill. A run that did not
// ask to stream asks the skill for no progress and gets no such chunk.
func TestStreaming_ToolProgressChunksOnTheReplyStream(t *testing.T) {
	wholeRun(t)
	run := func(t *testing.T, runID string, stream bool) []runclient.Chunk {
		return exportRun(t, runID, stream, "", runclient.ChunkToolProgress)
	}
	chunks := run(t, "run-progress", true)
	if len(chunks) != 4 || !chunks[3].EndOfMessage || chunks[3].Content != "" {
		t.Fatalf("%d tool_progress chunks %+v, want three reports and the end of the message", len(chunks), chunks)
	}
	for i, ch := range chunks[:3] {
		var p runclient.ToolProgress
		if err := json.Unmarshal([]byte(ch.Content), &p); err != nil {
			t.Fatal(err)
		}
		want := runclient.ToolProgress{RunID: "run-progress", StepIndex: p.StepIndex, SkillID: "export_report", CallID: "c1",
			Progress: float64(i + 1), Total: 3, Message: fmt.Sprintf("page %d", i+1)}
		if p != want || ch.MessageID != chunks[0].MessageID || ch.EndOfMessage || ch.SessionID != handlerstest.Session {
			t.Fatalf("chunk %d: %+v (%+v), want %+v in one message", i, ch, p, want)
		}
	}
	if chunks := run(t, "run-quiet", false); len(chunks) != 0 {
		t.Fatalf("a run that does not stream got %+v", chunks)
	}
}

// replyChunks are the chunks of the given types on the test session's
// reply subject, in order.
func replyChunks(t *testing.T, env *handlerstest.Env, types ...string) []runclient.Chunk {
	t.Helper()
	c, err := env.JS.OrderedConsumer(handlerstest.Ctx(t), events.StreamReply, jetstream.OrderedConsumerConfig{
		FilterSubjects: []string{events.ReplySubject(handlerstest.Tenant, handlerstest.Session)}})
	if err != nil {
		t.Fatal(err)
	}
	var out []runclient.Chunk
	for {
		msg, err := c.Next(jetstream.FetchMaxWait(500 * time.Millisecond))
		if err != nil {
			return out
		}
		ev, err := events.FromMsg(msg.Headers(), msg.Data())
		if err != nil {
			t.Fatal(err)
		}
		if ch := handlerstest.Decode[runclient.Chunk](t, ev); slices.Contains(types, ch.MessageType) {
			out = append(out, ch)
		}
	}
}

// TestStreaming_ThoughtsAndObservations: a run that asked to stream gets
// each step's thoughts (what its model said while it called a tool) and
// observations (each tool result, naming the run, step, skill and call)
// as messages of their own, in the order they happened, before the
// answer, with the run's secrets redacted; a run that did not ask gets
// none.
func TestStreaming_ThoughtsAndObservations(t *testing.T) {
	wholeRun(t)
	run := func(t *testing.T, runID string, stream bool) []runclient.Chunk {
		return exportRun(t, runID, stream, "The report has to be exported first, with key whsec-0123456789.",
			runclient.ChunkThought, runclient.ChunkObservation)
	}
	chunks := run(t, "run-thinks", true)
	if len(chunks) != 2 || chunks[0].MessageType != runclient.ChunkThought || chunks[1].MessageType != runclient.ChunkObservation {
		t.Fatalf("chunks %+v, want a thought then an observation", chunks)
	}
	// A secret of the executor's is not streamed.
	if c := chunks[0]; c.Content != "The report has to be exported first, with key [redacted]." || !c.EndOfMessage || c.SessionID != handlerstest.Session {
		t.Fatalf("thought %+v", c)
	}
	var o runclient.Observation
	if err := json.Unmarshal([]byte(chunks[1].Content), &o); err != nil {
		t.Fatal(err)
	}
	if o.RunID != "run-thinks" || o.StepIndex == 0 || o.SkillID != "export_report" || o.CallID != "c1" || o.IsError ||
		!strings.Contains(o.Result, "exported") || !chunks[1].EndOfMessage || chunks[1].MessageID == chunks[0].MessageID {
		t.Fatalf("observation %+v (%+v)", o, chunks[1])
	}
	if chunks := run(t, "run-silent", false); len(chunks) != 0 {
		t.Fatalf("a run that does not stream got %+v", chunks)
	}
}

// exportRun is a ReACT run whose one step calls export_report on the
// longJob server, saying thought as it does, then answers; the executor
// keeps the secret whsec-0123456789 and streams to runs that ask. It
// returns the chunks of the given types the run left on the reply stream.
func exportRun(t *testing.T, runID string, stream bool, thought string, types ...string) []runclient.Chunk {
	t.Helper()
	env := handlerstest.NewEnv(t)
	model := llmtest.New()
	model.Default = offline.New()
	model.On(llm.TaskRoute, routeTo("research", router.PatternReact))
	call := handlerstest.ToolCallResp("c1", "export_report", `{}`)
	call.Message.Content = thought
	model.On(llm.TaskAct, llmtest.Reply{Response: call}, loopAnswer(t, "exported"))
	f := patternFlow(t, env, model)
	sk := longJob(t)
	f.planner.Skills, f.exec.Skills = sk, sk
	f.exec.Replies = &handlers.Replies{JS: env.JS}
	f.exec.Secrets = []string{"whsec-0123456789"}
	ev := runEvent(t, runID, stream)
	req := handlerstest.RunRequest(runID, "Export the outlet's monthly report")
	req.Stream = stream
	if err := ev.SetData("application/json", req); err != nil {
		t.Fatal(err)
	}
	if res, seen := f.drive(t, ev); res.TerminalCode != orch.CodeSuccess {
		t.Fatalf("run ended %s: %s; trace %v", res.TerminalCode, res.Response, traceNames(seen))
	}
	return replyChunks(t, env, types...)
}
