package tracing

import (
	"context"
	"strings"
	"testing"

	"github.com/cloudevents/sdk-go/v2/event"
	"go.opentelemetry.io/otel"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/agentbus/agentbus/events"
	"github.com/agentbus/agentbus/llm"
)

type echoModel struct{}

func (echoModel) Complete(context.Context, llm.Request) (llm.Response, error) {
	return llm.Response{Model: "m1", Provider: "offline", Usage: llm.Usage{InputTokens: 12, OutputTokens: 3}}, nil
}

// A hop's span is the child of the traceparent its input carries, its
// outputs carry the hop's own span, and a model call inside it is a chat
// span of the same trace with the GenAI usage attributes.
func TestMiddleware_HopSpansChainThroughTheEvents(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	otel.SetTracerProvider(sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec)))
	const parent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	in, err := events.New("ev-1", events.TypeStepRequested, events.Meta{Tenant: "acme", Session: "s1", Run: "run-1", TraceParent: parent}, map[string]any{"x": 1})
	if err != nil {
		t.Fatal(err)
	}
	h := Middleware("executor")(func(ctx context.Context, ev event.Event) ([]event.Event, error) {
		if _, err := Model(echoModel{}).Complete(ctx, llm.Request{Task: llm.TaskAct}); err != nil {
			return nil, err
		}
		out, err := events.Child(ev, "out", events.TypeStepFinished, map[string]any{"y": 2})
		return []event.Event{out}, err
	})
	outs, err := h(context.Background(), in)
	if err != nil || len(outs) != 1 {
		t.Fatalf("handler: %d outputs, %v", len(outs), err)
	}
	spans := rec.Ended()
	if len(spans) != 2 {
		t.Fatalf("%d spans ended, want the chat and the hop", len(spans))
	}
	chat, hop := spans[0], spans[1]
	if hop.Name() != "invoke_agent executor" || hop.Parent().SpanID().String() != "00f067aa0ba902b7" ||
		hop.SpanContext().TraceID().String() != "4bf92f3577b34da6a3ce929d0e0e4736" {
		t.Errorf("hop span %s, parent %s, trace %s", hop.Name(), hop.Parent().SpanID(), hop.SpanContext().TraceID())
	}
	if chat.Name() != "chat m1" || chat.Parent().SpanID() != hop.SpanContext().SpanID() {
		t.Errorf("chat span %s under %s", chat.Name(), chat.Parent().SpanID())
	}
	attrs := map[string]any{}
	for _, a := range chat.Attributes() {
		attrs[string(a.Key)] = a.Value.AsInterface()
	}
	if attrs["gen_ai.usage.input_tokens"] != int64(12) || attrs["gen_ai.provider.name"] != "offline" {
		t.Errorf("chat attributes %v", attrs)
	}
	tp := events.Ext(outs[0], events.ExtTraceParent)
	if !strings.Contains(tp, hop.SpanContext().SpanID().String()) || !strings.Contains(tp, "4bf92f3577b34da6a3ce929d0e0e4736") {
		t.Errorf("output traceparent %q, want the hop's span", tp)
	}
	if got := TraceParent(WithTraceParent(context.Background(), parent)); got != parent {
		t.Errorf("traceparent round trip: %q", got)
	}
}
