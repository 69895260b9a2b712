// Package tracing is agentbus's OpenTelemetry tracing: one run is one
// trace across every process it passes through. The W3C trace context
// travels in each CloudEvent (the distributed-tracing extension,
// traceparent) and in each MCP tool call's _meta; every role's hop is a
// span, child of the span that emitted its input, and its outputs carry
// the hop's own span. Model and tool calls are spans named and attributed
// as the OpenTelemetry GenAI semantic conventions say (chat, execute_tool,
// invoke_agent; gen_ai.* attributes).
//
// Export is OTLP over HTTP, turned on by the process (Setup; agentbus's
// processes do when OTEL_EXPORTER_OTLP_ENDPOINT or
// OTEL_EXPORTER_OTLP_TRACES_ENDPOINT is set) and configured by the
// OpenTelemetry SDK's standard environment. Without it no span is
// recorded, and tracing costs a context lookup per call.
package tracing

import (
	"context"
	"errors"
	"sync/atomic"

	"github.com/cloudevents/sdk-go/v2/event"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	"github.com/agentbus/agentbus/events"
	"github.com/agentbus/agentbus/llm"
)

// Name is the instrumentation scope of agentbus's spans.
const Name = "github.com/agentbus/agentbus"

var propagator = propagation.TraceContext{}

func tracer() trace.Tracer { return otel.Tracer(Name) }

// enabled is set once a Setup of the process exports.
var enabled atomic.Bool

// Enabled reports whether the process exports its spans (Setup).
func Enabled() bool { return enabled.Load() }

// Setup installs the process's tracer provider for service (the process's
// name), exporting to OTLP over HTTP when export is true; the exporter
// takes its endpoint and options from the SDK's OTEL_EXPORTER_OTLP_*
// environment. The returned shutdown flushes what is buffered; call it
// before exiting.
func Setup(ctx context.Context, service string, export bool) (shutdown func(context.Context) error, err error) {
	if !export {
		return func(context.Context) error { return nil }, nil
	}
	exp, err := otlptracehttp.New(ctx)
	if err != nil {
		return nil, err
	}
	res, err := resource.Merge(resource.Default(), resource.NewSchemaless(
		attribute.String("service.name", service), attribute.String("service.namespace", "agentbus")))
	if err != nil && !errors.Is(err, resource.ErrPartialResource) && !errors.Is(err, resource.ErrSchemaURLConflict) {
		return nil, err
	}
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithResource(res))
	otel.SetTracerProvider(tp)
	enabled.Store(true)
	return tp.Shutdown, nil
}

// TraceParent returns the W3C traceparent of ctx's span, "" when ctx has
// none.
func TraceParent(ctx context.Context) string {
	c := propagation.MapCarrier{}
	propagator.Inject(ctx, c)
	return c["traceparent"]
}

// WithTraceParent returns ctx with the remote span of traceparent as its
// parent (ctx unchanged when it is empty or malformed).
func WithTraceParent(ctx context.Context, traceparent string) context.Context {
	if traceparent == "" {
		return ctx
	}
	return propagator.Extract(ctx, propagation.MapCarrier{"traceparent": traceparent})
}

// Middleware gives each message a role handles a span, invoke_agent
// <role>, child of the traceparent its event carries; the events it emits
// carry the span's traceparent instead, so the hops they start are its
// children.
func Middleware(role string) events.Middleware {
	return func(next events.Handler) events.Handler {
		return func(ctx context.Context, ev event.Event) ([]event.Event, error) {
			ctx = WithTraceParent(ctx, events.Ext(ev, events.ExtTraceParent))
			ctx, span := tracer().Start(ctx, "invoke_agent "+role, trace.WithSpanKind(trace.SpanKindConsumer),
				trace.WithAttributes(
					attribute.String("gen_ai.operation.name", "invoke_agent"),
					attribute.String("gen_ai.agent.name", role),
					attribute.String("messaging.system", "nats"),
					attribute.String("messaging.message.id", ev.ID()),
					attribute.String("cloudevents.event_type", ev.Type()),
					attribute.String("agentbus.tenant_id", events.Ext(ev, events.ExtTenant)),
					attribute.String("agentbus.run_id", events.Ext(ev, events.ExtRun)),
				))
			defer span.End()
			outs, err := next(ctx, ev)
			if err != nil {
				span.RecordError(err)
				span.SetStatus(codes.Error, err.Error())
				return outs, err
			}
			if tp := TraceParent(ctx); tp != "" {
				for i := range outs {
					events.SetExt(&outs[i], events.ExtTraceParent, tp)
				}
			}
			span.SetAttributes(attribute.Int("agentbus.outputs", len(outs)))
			return outs, nil
		}
	}
}

// Model wraps m so that each call is a span, chat <model>, with the GenAI
// request and usage attributes.
func Model(m llm.Model) llm.Model { return tracedModel{m} }

type tracedModel struct{ m llm.Model }

func (t tracedModel) Complete(ctx context.Context, req llm.Request) (llm.Response, error) {
	ctx, span := tracer().Start(ctx, "chat", trace.WithSpanKind(trace.SpanKindClient), trace.WithAttributes(
		attribute.String("gen_ai.operation.name", "chat"),
		attribute.String("agentbus.task", string(req.Task)),
		attribute.String("agentbus.prompt_version", req.PromptVersion),
	))
	defer span.End()
	resp, err := t.m.Complete(ctx, req)
	if err != nil {
		span.RecordError(err)
		span.SetStatus(codes.Error, err.Error())
		return resp, err
	}
	if resp.Model != "" {
		span.SetName("chat " + resp.Model)
	}
	span.SetAttributes(
		attribute.String("gen_ai.provider.name", resp.Provider),
		attribute.String("gen_ai.request.model", resp.Model),
		attribute.String("gen_ai.response.model", resp.Model),
		attribute.Int("gen_ai.usage.input_tokens", resp.Usage.InputTokens),
		attribute.Int("gen_ai.usage.output_tokens", resp.Usage.OutputTokens),
		attribute.Float64("agentbus.cost_usd", resp.Usage.CostUSD),
	)
	return resp, nil
}

// Tool starts the span of a tool call, execute_tool <name>; end ends it
// with the call's error, if any.
func Tool(ctx context.Context, name, callID string) (context.Context, func(error)) {
	ctx, span := tracer().Start(ctx, "execute_tool "+name, trace.WithSpanKind(trace.SpanKindClient), trace.WithAttributes(
		attribute.String("gen_ai.operation.name", "execute_tool"),
		attribute.String("gen_ai.tool.name", name),
		attribute.String("gen_ai.tool.type", "function"),
		attribute.String("gen_ai.tool.call.id", callID),
	))
	return ctx, func(err error) {
		if err != nil {
			span.RecordError(err)
			span.SetStatus(codes.Error, err.Error())
		}
		span.End()
	}
}

// Server starts the span of an ingress request that starts a run.
func Server(ctx context.Context, name string) (context.Context, trace.Span) {
	return tracer().Start(ctx, name, trace.WithSpanKind(trace.SpanKindServer),
		trace.WithAttributes(attribute.String("gen_ai.operation.name", "invoke_agent"), attribute.String("gen_ai.agent.name", "agentbus")))
}
