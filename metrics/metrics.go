// Package metrics is agentbus's Prometheus instrumentation. Every process
// serves its Registry at /metrics (the ingress on its HTTP listener, a
// role process on --metrics-addr): the messages each role finished and
// how (acked, retried, dead-lettered), how long their handling took, each
// role's consumer lag, and what the stored outputs of those messages say
// about runs: model tokens and cost, skill calls, budget stops, gates and
// how long they waited, runs finished by terminal code.
//
// No metric has a tenant label: the numbers of one tenant are the plan
// health view's, behind the tenant's credential.
package metrics

import (
	"context"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/cloudevents/sdk-go/v2/event"
	json "github.com/go-json-experiment/json/v1"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/agentbus/agentbus/events"
)

// Registry holds the process's metrics, with the Go runtime's and the
// process's own.
var Registry = prometheus.NewRegistry()

var (
	messages = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "agentbus_messages_total",
		Help: "Messages a role's consumer finished, by event type and outcome (acked, retried, dead_lettered, dropped).",
	}, []string{"role", "type", "outcome"})
	handleSeconds = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "agentbus_handle_seconds",
		Help:    "Time from a message's delivery to its ack, nak or dead letter, by role.",
		Buckets: []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60},
	}, []string{"role"})
	pending = prometheus.NewDesc("agentbus_consumer_pending",
		"Messages of the role's stream its consumer has not delivered yet.", []string{"role"}, nil)
	ackPending = prometheus.NewDesc("agentbus_consumer_ack_pending",
		"Messages delivered to the role's consumer and not acknowledged yet.", []string{"role"}, nil)
	runsFinished = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "agentbus_runs_finished_total",
		Help: "Runs that ended, by terminal code and plan status.",
	}, []string{"terminal_code", "status"})
	modelCalls = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "agentbus_model_calls_total",
		Help: "Model calls, by provider, model, task and outcome (ok, error).",
	}, []string{"provider", "model", "task", "outcome"})
	modelTokens = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "agentbus_model_tokens_total",
		Help: "Model tokens, by provider, model and kind (input, output, cached_input).",
	}, []string{"provider", "model", "kind"})
	modelCost = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "agentbus_model_cost_usd_total",
		Help: "Model cost in US dollars, by provider and model.",
	}, []string{"provider", "model"})
	skillCalls = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "agentbus_skill_calls_total",
		Help: "Skill calls made, by skill and outcome (ok, error), and those whose response took the large-response path.",
	}, []string{"skill", "outcome"})
	skillSeconds = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "agentbus_skill_call_seconds",
		Help:    "Duration of skill calls, by skill.",
		Buckets: prometheus.DefBuckets,
	}, []string{"skill"})
	largeResponses = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "agentbus_large_responses_total",
		Help: "Skill responses large enough to take the large-response path.",
	})
	budgetStops = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "agentbus_budget_stops_total",
		Help: "Budget stops (budget.exhausted), by the role that stopped.",
	}, []string{"role"})
	gatesOpened = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "agentbus_gates_opened_total",
		Help: "Gates runs parked at, by kind (approval, interrupt, elicitation).",
	}, []string{"kind"})
	requestsLimited = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "agentbus_requests_limited_total",
		Help: "Requests the ingress refused 429 for a tenant's request limits, by code (rate_limited, concurrency_limited).",
	}, []string{"code"})
	modelSlotWait = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "agentbus_model_slot_wait_seconds",
		Help:    "How long model calls waited for a free slot of their provider's concurrency limit (calls that found one free are not observed), by provider.",
		Buckets: []float64{0.01, 0.05, 0.1, 0.5, 1, 5, 15, 60, 300},
	}, []string{"provider"})
	gateWait = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "agentbus_gate_wait_seconds",
		Help:    "How long a gate waited for its resolution, by kind and decision.",
		Buckets: []float64{1, 5, 15, 60, 300, 900, 1800, 3600, 4 * 3600, 24 * 3600},
	}, []string{"kind", "decision"})
)

var lag = &lagCollector{consumers: map[string]jetstream.Consumer{}}

func init() {
	Registry.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		messages, handleSeconds, runsFinished, modelCalls, modelTokens, modelCost, skillCalls, skillSeconds,
		largeResponses, budgetStops, gatesOpened, gateWait, modelSlotWait, requestsLimited, lag)
}

// Handler serves the Registry in the Prometheus exposition format.
func Handler() http.Handler {
	return promhttp.HandlerFor(Registry, promhttp.HandlerOpts{Registry: Registry})
}

// Done returns the events.WorkerConfig.OnDone of role: it counts each
// finished message and times it, and reads what the acked message's
// stored outputs say about its run (Observe).
func Done(role string) func(ev *event.Event, outs []event.Event, outcome string, took time.Duration) {
	return func(ev *event.Event, outs []event.Event, outcome string, took time.Duration) {
		typ := "undecodable"
		if ev != nil {
			typ = strings.TrimPrefix(ev.Type(), "io.agentbus.")
		}
		messages.WithLabelValues(role, typ, outcome).Inc()
		handleSeconds.WithLabelValues(role).Observe(took.Seconds())
		for _, out := range outs {
			Observe(role, out)
		}
	}
}

// Observe counts what one stored event says: a run finished, a model or
// skill call, a budget stop, a gate opened. Other events count nothing.
func Observe(role string, ev event.Event) {
	typ := ev.Type()
	if typ == events.TypeRunFinished {
		var r struct {
			Status string `json:"status"`
			Code   string `json:"terminal_code"`
		}
		if json.Unmarshal(ev.Data(), &r) == nil {
			runsFinished.WithLabelValues(r.Code, r.Status).Inc()
		}
		return
	}
	name, ok := strings.CutPrefix(typ, events.TypeAuditPrefix)
	if !ok {
		return
	}
	switch name {
	case "model.called":
		var c struct {
			Task     string  `json:"task"`
			Provider string  `json:"provider"`
			Model    string  `json:"model"`
			In       int     `json:"input_tokens"`
			Out      int     `json:"output_tokens"`
			Cached   int     `json:"cached_input_tokens"`
			Cost     float64 `json:"cost_usd"`
			Error    string  `json:"error"`
		}
		if payload(ev, &c) {
			outcome := "ok"
			if c.Error != "" {
				outcome = "error"
			}
			modelCalls.WithLabelValues(c.Provider, c.Model, c.Task, outcome).Inc()
			modelTokens.WithLabelValues(c.Provider, c.Model, "input").Add(float64(c.In))
			modelTokens.WithLabelValues(c.Provider, c.Model, "output").Add(float64(c.Out))
			modelTokens.WithLabelValues(c.Provider, c.Model, "cached_input").Add(float64(c.Cached))
			modelCost.WithLabelValues(c.Provider, c.Model).Add(c.Cost)
		}
	case "skill.called":
		var c struct {
			Skill   string `json:"skill_id"`
			Millis  int64  `json:"duration_ms"`
			IsError bool   `json:"is_error"`
			Large   bool   `json:"large_response_triggered"`
		}
		if payload(ev, &c) {
			outcome := "ok"
			if c.IsError {
				outcome = "error"
			}
			skillCalls.WithLabelValues(c.Skill, outcome).Inc()
			skillSeconds.WithLabelValues(c.Skill).Observe(float64(c.Millis) / 1000)
			if c.Large {
				largeResponses.Inc()
			}
		}
	case "budget.exhausted":
		budgetStops.WithLabelValues(role).Inc()
	case "gate.opened":
		var g struct {
			Kind string `json:"kind"`
		}
		if payload(ev, &g) {
			gatesOpened.WithLabelValues(g.Kind).Inc()
		}
	}
}

// payload decodes the payload of an audit event (events.Audit) into v, a
// pointer, in one pass over the event's data.
func payload(ev event.Event, v any) bool {
	a := struct {
		Payload any `json:"payload"`
	}{Payload: v} // a non-nil pointer in an interface is decoded into
	return json.Unmarshal(ev.Data(), &a) == nil
}

// GateWait records how long a gate of kind waited for decision.
func GateWait(kind, decision string, waited time.Duration) {
	gateWait.WithLabelValues(kind, decision).Observe(max(waited, 0).Seconds())
}

// WatchConsumer reports the lag of role's consumer (pending and
// ack-pending messages), read from the server when scraped.
func WatchConsumer(role string, cons jetstream.Consumer) {
	lag.mu.Lock()
	defer lag.mu.Unlock()
	lag.consumers[role] = cons
}

// lagCollector reads the consumers' info at each scrape.
type lagCollector struct {
	mu        sync.Mutex
	consumers map[string]jetstream.Consumer
}

func (l *lagCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- pending
	ch <- ackPending
}

func (l *lagCollector) Collect(ch chan<- prometheus.Metric) {
	l.mu.Lock()
	consumers := make(map[string]jetstream.Consumer, len(l.consumers))
	for role, c := range l.consumers {
		consumers[role] = c
	}
	l.mu.Unlock()
	for role, c := range consumers {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		info, err := c.Info(ctx)
		cancel()
		if err != nil {
			continue // no figure rather than a stale one
		}
		ch <- prometheus.MustNewConstMetric(pending, prometheus.GaugeValue, float64(info.NumPending), role)
		ch <- prometheus.MustNewConstMetric(ackPending, prometheus.GaugeValue, float64(info.NumAckPending), role)
	}
}

// ModelSlotWait records a model call's wait for a free slot of its
// provider's concurrency limit (llm.Slots.OnWait).
func ModelSlotWait(provider string, waited time.Duration) {
	modelSlotWait.WithLabelValues(provider).Observe(waited.Seconds())
}

// RequestLimited counts a request refused for a tenant's request limits.
func RequestLimited(code string) { requestsLimited.WithLabelValues(code).Inc() }
