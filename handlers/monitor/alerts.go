package monitor

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/cloudevents/sdk-go/v2/event"
	json "github.com/go-json-experiment/json/v1"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"

	"github.com/agentbus/agentbus/events"
	"github.com/agentbus/agentbus/handlers"
	"github.com/agentbus/agentbus/handlers/health"
)

// Alerts (seed 000 §10). The monitor role evaluates a tenant's alert
// rules over its plan health when an alert.evaluate message arrives: the
// projector schedules one, a minute ahead, when it stores a run.finished
// (one per tenant and minute: the id derives from both), and the monitor
// schedules the next while any rule fires, so a firing alert is seen
// resolving even when no run finishes. Each rule's state is kept in the
// alerts bucket (<tenant>.<rule>); a change of state is an alert.fired or
// alert.resolved audit event and, when configured, a signed webhook POST.

// AlertWindow is the window the alert rules judge health over.
const AlertWindow = time.Hour

// AlertRule is one alert: its name, what it means, and whether a tenant's
// health fires it (with the value it judged).
type AlertRule struct {
	Name        string
	Description string
	Threshold   float64
	Judge       func(h health.Health) (value float64, firing bool)
}

// AlertRules are the rules of seed 000 §10, judged over AlertWindow.
var AlertRules = []AlertRule{
	{Name: "plan_success_low", Description: "plan success rate below 80 % over 1 h", Threshold: 0.8,
		Judge: func(h health.Health) (float64, bool) { return h.SuccessRate, h.Runs > 0 && h.SuccessRate < 0.8 }},
	{Name: "replan_exhaustion_high", Description: "replan exhaustion above 5 % of runs", Threshold: 0.05,
		Judge: func(h health.Health) (float64, bool) { return h.ReplanExhaustionRate, h.ReplanExhaustionRate > 0.05 }},
	{Name: "contract_violation", Description: "a step output broke its contract", Threshold: 0,
		Judge: func(h health.Health) (float64, bool) { return float64(h.ContractViolations), h.ContractViolations > 0 }},
	{Name: "python_timeouts_high", Description: "exec_python timeouts above 5 % of scripts", Threshold: 0.05,
		Judge: func(h health.Health) (float64, bool) { return h.PythonTimeoutRate, h.PythonTimeoutRate > 0.05 }},
	{Name: "memory_lock_wait_high", Description: "a memory write waited over 2 s for its lock", Threshold: 2000,
		Judge: func(h health.Health) (float64, bool) {
			return float64(h.MemoryLockWaitMaxMS), h.MemoryLockWaitMaxMS > 2000
		}},
}

// Alert is an alert's state, as the alerts bucket keeps it and as
// alert.fired, alert.resolved and the webhook carry it.
type Alert struct {
	// ID identifies one firing (tenant, rule, since): a webhook receiver
	// dedupes by it.
	ID          string    `json:"alert_id"`
	TenantID    string    `json:"tenant_id"`
	Rule        string    `json:"rule"`
	Description string    `json:"description"`
	State       string    `json:"state"` // firing or resolved
	Value       float64   `json:"value"`
	Threshold   float64   `json:"threshold"`
	Window      string    `json:"window"`
	Since       time.Time `json:"since"`
	ResolvedAt  time.Time `json:"resolved_at,omitzero"`
}

// Alert states.
const (
	AlertFiring   = "firing"
	AlertResolved = "resolved"
)

// Monitor is the monitor role.
type Monitor struct {
	Store health.EventQuerier
	KV    jetstream.KeyValue
	// Webhook, when set, receives every change of an alert's state.
	Webhook *Webhook
	// Interval is how soon a tenant with a firing alert is evaluated
	// again; default a minute.
	Interval time.Duration
	Now      func() time.Time
	Log      zerolog.Logger
}

// Routes are the monitor's routes.
func (m *Monitor) Routes() []events.Route {
	return []events.Route{events.On(events.TypeAlertEvaluate, m.evaluate)}
}

// Handle is the monitor's events.Handler.
func (m *Monitor) Handle(ctx context.Context, ev event.Event) ([]event.Event, error) {
	return events.Dispatch(handlers.RoleMonitor, m.Routes()...)(ctx, ev)
}

func (m *Monitor) now() time.Time {
	if m.Now != nil {
		return m.Now().UTC()
	}
	return time.Now().UTC()
}

// evaluate judges every rule over the tenant's health of the last
// AlertWindow and records each change of state. A webhook that fails
// fails the message, so the change is sent again on its redelivery.
func (m *Monitor) evaluate(ctx context.Context, ev event.Event, in handlers.AlertEvaluate) ([]event.Event, error) {
	now := m.now()
	h, err := health.TenantHealth(ctx, m.Store, in.TenantID, now.Add(-AlertWindow), now)
	if err != nil {
		return nil, err
	}
	out := handlers.Outbox{In: ev}
	firing := false
	for _, rule := range AlertRules {
		value, fires := rule.Judge(h)
		firing = firing || fires
		changed, err := m.transition(ctx, in.TenantID, rule, value, fires, now)
		if err != nil {
			return nil, err
		}
		if changed != nil {
			name := "alert.resolved"
			if changed.State == AlertFiring {
				name = "alert.fired"
			}
			out.Audit(name, events.Audit{}, changed)
		}
	}
	if firing {
		slot := now.Add(m.interval()).Truncate(m.interval())
		out.EmitIDAt(events.DeriveID(in.TenantID, "alerts/"+strconv.FormatInt(slot.Unix(), 10)), events.TypeAlertEvaluate,
			handlers.AlertEvaluate{TenantID: in.TenantID}, slot)
	}
	return out.Result()
}

func (m *Monitor) interval() time.Duration {
	if m.Interval > 0 {
		return m.Interval
	}
	return time.Minute
}

// transition records rule's new state for tenant when it changed, and
// returns the alert it changed to (nil when it did not).
func (m *Monitor) transition(ctx context.Context, tenant string, rule AlertRule, value float64, fires bool, now time.Time) (*Alert, error) {
	key := tenant + "." + rule.Name
	var cur Alert
	var rev uint64
	e, err := m.KV.Get(ctx, key)
	switch {
	case errors.Is(err, jetstream.ErrKeyNotFound):
	case err != nil:
		return nil, fmt.Errorf("handlers: alert %s: %w", key, err)
	default:
		if err := json.Unmarshal(e.Value(), &cur); err != nil {
			return nil, fmt.Errorf("handlers: alert %s: %w", key, err)
		}
		rev = e.Revision()
	}
	if fires == (cur.State == AlertFiring) {
		return nil, nil
	}
	next := Alert{TenantID: tenant, Rule: rule.Name, Description: rule.Description, Value: value, Threshold: rule.Threshold,
		Window: AlertWindow.String()}
	if fires {
		next.State, next.Since = AlertFiring, now
	} else {
		next.State, next.Since, next.ResolvedAt = AlertResolved, cur.Since, now
	}
	next.ID = events.DeriveID(tenant, rule.Name+"/"+next.Since.Format(time.RFC3339Nano))
	if m.Webhook != nil {
		if err := m.Webhook.Send(ctx, next); err != nil {
			return nil, err
		}
	}
	b, err := json.Marshal(next)
	if err != nil {
		return nil, err
	}
	if rev == 0 {
		_, err = m.KV.Create(ctx, key, b)
	} else {
		_, err = m.KV.Update(ctx, key, b, rev)
	}
	if err != nil {
		// Another evaluation changed it first: this one's view is stale,
		// and the redelivery judges again.
		return nil, fmt.Errorf("handlers: alert %s: %w", key, err)
	}
	m.Log.Warn().Str("tenant_id", tenant).Str("rule", rule.Name).Str("state", next.State).Float64("value", value).Msg("alert")
	return &next, nil
}

// Webhook POSTs alerts as JSON to URL, signed: the header
// X-Agentbus-Signature is "sha256=" and the hex HMAC-SHA256, keyed with
// Secret, of the X-Agentbus-Timestamp header's value, a dot, and the body.
type Webhook struct {
	URL    string
	Secret []byte
	Client *http.Client
}

// Signature returns the signature of body sent at timestamp ts.
func (w *Webhook) Signature(ts string, body []byte) string {
	mac := hmac.New(sha256.New, w.Secret)
	mac.Write([]byte(ts + "."))
	mac.Write(body)
	return "sha256=" + hex.EncodeToString(mac.Sum(nil))
}

// Send posts a. A 2xx answer is success; anything else is an error that
// names the status, never the secret.
func (w *Webhook) Send(ctx context.Context, a Alert) error {
	body, err := json.Marshal(a)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, w.URL, bytes.NewReader(body))
	if err != nil {
		return fmt.Errorf("handlers: alert webhook: %w", err)
	}
	ts := strconv.FormatInt(time.Now().Unix(), 10)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Agentbus-Timestamp", ts)
	req.Header.Set("X-Agentbus-Signature", w.Signature(ts, body))
	client := w.Client
	if client == nil {
		client = http.DefaultClient
	}
	resp, err := client.Do(req)
	if err != nil {
		return fmt.Errorf("handlers: alert webhook: %w", err)
	}
	_ = resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("handlers: alert webhook answered %s", resp.Status)
	}
	return nil
}
