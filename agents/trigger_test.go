package agents

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	json "github.com/go-json-experiment/json/v1"

	"github.com/agentbus/agentbus/store"
)

// seedConditions is the seed's example: inbound Facebook or Instagram
// messages of open conversations that ask for help or support.
const seedConditions = `{
  "all": [
    {"field": "channel.platform", "operator": "in", "value": ["facebook", "instagram"]},
    {"field": "conversation.status", "operator": "eq", "value": "open"},
    {"field": "message.direction", "operator": "eq", "value": "inbound"}
  ],
  "any": [
    {"field": "message.text", "operator": "contains", "value": "help"},
    {"field": "message.text", "operator": "contains", "value": "support"}
  ]
}`

func event(t *testing.T, raw string) map[string]any {
	t.Helper()
	var ev map[string]any
	if err := json.Unmarshal([]byte(raw), &ev); err != nil {
		t.Fatal(err)
	}
	return ev
}

func conditions(t *testing.T, raw string) Conditions {
	t.Helper()
	var c Conditions
	if err := json.Unmarshal([]byte(raw), &c); err != nil {
		t.Fatal(err)
	}
	if err := c.Validate(); err != nil {
		t.Fatalf("conditions do not validate: %v", err)
	}
	return c
}

func TestSeedConditions(t *testing.T) {
	c := conditions(t, seedConditions)
	msg := func(platform, status, direction, text string) string {
		return fmt.Sprintf(`{"channel":{"platform":%q},"conversation":{"status":%q},"message":{"direction":%q,"text":%q}}`,
			platform, status, direction, text)
	}
	for _, tc := range []struct {
		ev   string
		want bool
	}{
		{msg("facebook", "open", "inbound", "I need HELP with my order"), true},
		{msg("instagram", "open", "inbound", "support please"), true},
		{msg("whatsapp", "open", "inbound", "help"), false},                                            // all: platform not in the list
		{msg("facebook", "closed", "inbound", "help"), false},                                          // all: status
		{msg("facebook", "open", "outbound", "help"), false},                                           // all: direction
		{msg("facebook", "open", "inbound", "where is my order"), false},                               // any: no keyword
		{`{"channel":{"platform":"facebook"},"message":{"direction":"inbound","text":"help"}}`, false}, // field absent
		{`{"channel":"facebook","conversation":{"status":"open"},"message":{"direction":"inbound","text":"help"}}`, false},
	} {
		if got := c.Eval(event(t, tc.ev)); got != tc.want {
			t.Errorf("Eval(%s) = %v, want %v", tc.ev, got, tc.want)
		}
	}
	if !(Conditions{}).Eval(map[string]any{}) {
		t.Fatal("empty conditions must hold")
	}
}

func TestOperators(t *testing.T) {
	ev := event(t, `{"n":5,"f":2.5,"s":"Hello World","b":true,"z":null,"tags":["vip","new"],"o":{"deep":{"x":"y"}}}`)
	cases := []struct {
		field, op string
		value     string // JSON
		want      bool
	}{
		{"n", OpEq, `5`, true}, {"n", OpEq, `5.0`, true}, {"n", OpEq, `"5"`, false}, {"s", OpEq, `"hello world"`, false},
		{"b", OpEq, `true`, true}, {"z", OpEq, `null`, true}, {"missing", OpEq, `null`, false},
		{"o.deep.x", OpEq, `"y"`, true}, {"o.deep", OpEq, `"y"`, false}, {"s.length", OpEq, `11`, false},
		{"n", OpNe, `4`, true}, {"n", OpNe, `5`, false}, {"missing", OpNe, `1`, true},
		{"s", OpIn, `["a","Hello World"]`, true}, {"n", OpIn, `[1,2]`, false}, {"missing", OpIn, `[null]`, false},
		{"n", OpNotIn, `[1,2]`, true}, {"n", OpNotIn, `[5]`, false}, {"missing", OpNotIn, `[1]`, true},
		{"s", OpContains, `"WORLD"`, true}, {"s", OpContains, `"moon"`, false}, {"tags", OpContains, `"vip"`, true},
		{"tags", OpContains, `"VIP"`, false}, {"n", OpContains, `5`, false}, {"missing", OpContains, `"x"`, false},
		{"s", OpNotContains, `"moon"`, true}, {"s", OpNotContains, `"hello"`, false}, {"missing", OpNotContains, `"x"`, true},
		{"s", OpStartsWith, `"hello"`, true}, {"s", OpStartsWith, `"world"`, false}, {"n", OpStartsWith, `"5"`, false},
		{"s", OpExists, `true`, true}, {"z", OpExists, `true`, false}, {"z", OpExists, `false`, true},
		{"missing", OpExists, `false`, true}, {"missing", OpExists, `true`, false},
		{"n", OpGt, `4`, true}, {"n", OpGt, `5`, false}, {"n", OpGte, `5`, true}, {"f", OpLt, `2.6`, true},
		{"f", OpLt, `2.5`, false}, {"f", OpLte, `2.5`, true}, {"s", OpGt, `1`, false}, {"missing", OpLt, `1`, false},
	}
	for _, c := range cases {
		var v any
		if err := json.Unmarshal([]byte(c.value), &v); err != nil {
			t.Fatal(err)
		}
		cond := Condition{Field: c.field, Operator: c.op, Value: v}
		if err := cond.validate("c"); err != nil {
			t.Fatalf("%s %s %s does not validate: %v", c.field, c.op, c.value, err)
		}
		if got := cond.Eval(ev); got != c.want {
			t.Errorf("%s %s %s = %v, want %v", c.field, c.op, c.value, got, c.want)
		}
	}
}

func validTrigger() TriggerSpec {
	s := TriggerSpec{Name: "Support inbox", AgentID: "agent-1", EventType: EventMessageNew}
	s.Normalize()
	return s
}

func TestTriggerValidation(t *testing.T) {
	if s := validTrigger(); s.PriorityValue() != DefaultPriority || s.Status != StatusActive || s.Validate() != nil {
		t.Fatalf("defaults %+v: %v", s, s.Validate())
	}
	tooMany := make([]Condition, MaxConditions+1)
	for i := range tooMany {
		tooMany[i] = Condition{Field: "a", Operator: OpExists, Value: true}
	}
	cases := []struct {
		name, code, field string
		edit              func(*TriggerSpec)
	}{
		{"no name", CodeNameRequired, "name", func(s *TriggerSpec) { s.Name = "" }},
		{"long description", CodeFieldTooLong, "description", func(s *TriggerSpec) { s.Description = strings.Repeat("d", MaxDescriptionLen+1) }},
		{"no agent", CodeAgentRequired, "agent_id", func(s *TriggerSpec) { s.AgentID = "" }},
		{"malformed agent", CodeUnknownAgent, "agent_id", func(s *TriggerSpec) { s.AgentID = "a b" }},
		{"bad event type", CodeInvalidEventType, "event_type", func(s *TriggerSpec) { s.EventType = "message.deleted" }},
		{"no event type", CodeInvalidEventType, "event_type", func(s *TriggerSpec) { s.EventType = "" }},
		{"bad field", CodeInvalidCondition, "conditions.all[0].field", func(s *TriggerSpec) {
			s.Conditions.All = []Condition{{Field: "a..b", Operator: OpEq, Value: "x"}}
		}},
		{"bad operator", CodeInvalidOperator, "conditions.any[0].operator", func(s *TriggerSpec) {
			s.Conditions.Any = []Condition{{Field: "a", Operator: "like", Value: "x"}}
		}},
		{"in without array", CodeInvalidCondition, "conditions.all[0].value", func(s *TriggerSpec) {
			s.Conditions.All = []Condition{{Field: "a", Operator: OpIn, Value: "x"}}
		}},
		{"in with empty array", CodeInvalidCondition, "conditions.all[0].value", func(s *TriggerSpec) {
			s.Conditions.All = []Condition{{Field: "a", Operator: OpIn, Value: []any{}}}
		}},
		{"in with object", CodeInvalidCondition, "conditions.all[0].value", func(s *TriggerSpec) {
			s.Conditions.All = []Condition{{Field: "a", Operator: OpIn, Value: []any{map[string]any{}}}}
		}},
		{"eq with array", CodeInvalidCondition, "conditions.all[0].value", func(s *TriggerSpec) {
			s.Conditions.All = []Condition{{Field: "a", Operator: OpEq, Value: []any{"x"}}}
		}},
		{"contains null", CodeInvalidCondition, "conditions.all[0].value", func(s *TriggerSpec) {
			s.Conditions.All = []Condition{{Field: "a", Operator: OpContains, Value: nil}}
		}},
		{"starts_with empty", CodeInvalidCondition, "conditions.all[0].value", func(s *TriggerSpec) {
			s.Conditions.All = []Condition{{Field: "a", Operator: OpStartsWith, Value: ""}}
		}},
		{"exists with string", CodeInvalidCondition, "conditions.all[0].value", func(s *TriggerSpec) {
			s.Conditions.All = []Condition{{Field: "a", Operator: OpExists, Value: "yes"}}
		}},
		{"gt with string", CodeInvalidCondition, "conditions.any[0].value", func(s *TriggerSpec) {
			s.Conditions.Any = []Condition{{Field: "a", Operator: OpGt, Value: "3"}}
		}},
		{"too many", CodeTooManyConditions, "conditions.all", func(s *TriggerSpec) { s.Conditions.All = tooMany }},
		{"negative priority", CodeInvalidPriority, "priority", func(s *TriggerSpec) { s.Priority = ptr(-1) }},
		{"huge priority", CodeInvalidPriority, "priority", func(s *TriggerSpec) { s.Priority = ptr(MaxPriority + 1) }},
		{"draft status", CodeInvalidStatus, "status", func(s *TriggerSpec) { s.Status = StatusDraft }},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := validTrigger()
			c.edit(&s)
			err := s.Validate()
			if err == nil || err.Code != c.code || err.Field != c.field {
				t.Fatalf("got %+v, want code %s on %s", err, c.code, c.field)
			}
		})
	}
	zero := validTrigger()
	zero.Priority = ptr(0)
	if zero.Validate() != nil || zero.PriorityValue() != 0 {
		t.Fatal("priority 0 (the highest) is valid")
	}
}

// Match keeps the enabled triggers of the event's type whose conditions
// hold, lowest priority first, ties by id.
func TestMatchOrdersByPriority(t *testing.T) {
	help := conditions(t, `{"any":[{"field":"message.text","operator":"contains","value":"help"}]}`)
	trig := func(id string, prio int, status, typ string, c Conditions) Trigger {
		return Trigger{TriggerID: id, TriggerSpec: TriggerSpec{Name: id, AgentID: "agent-" + id, EventType: typ,
			Conditions: c, Priority: ptr(prio), Status: status}}
	}
	ts := []Trigger{
		trig("late", 500, StatusActive, EventMessageNew, Conditions{}),
		trig("b-first", 10, StatusActive, EventMessageNew, help),
		trig("a-first", 10, StatusActive, EventMessageNew, help),
		trig("top-but-off", 0, StatusInactive, EventMessageNew, Conditions{}),
		trig("webhook", 1, StatusActive, EventWebhook, Conditions{}),
		trig("no-help", 5, StatusActive, EventMessageNew, conditions(t, `{"all":[{"field":"message.text","operator":"eq","value":"hi"}]}`)),
	}
	ids := func(ts []Trigger) []string {
		var out []string
		for _, t := range ts {
			out = append(out, t.TriggerID)
		}
		return out
	}
	ev := event(t, `{"message":{"text":"please help"}}`)
	if got := ids(Match(ts, EventMessageNew, ev)); !slices.Equal(got, []string{"a-first", "b-first", "late"}) {
		t.Fatalf("matches %v", got)
	}
	slices.Reverse(ts)
	if got := ids(Match(ts, EventMessageNew, ev)); !slices.Equal(got, []string{"a-first", "b-first", "late"}) {
		t.Fatalf("matches of the reversed list %v", got)
	}
	if got := ids(Match(ts, EventWebhook, ev)); !slices.Equal(got, []string{"webhook"}) {
		t.Fatalf("webhook matches %v", got)
	}
	if got := Match(ts, EventSchedule, ev); len(got) != 0 {
		t.Fatalf("schedule matches %v", ids(got))
	}
}

// Evaluate explains every trigger: matched, or the first failed check
// (disabled, event type, the failed all condition, no any condition), in
// Match's order.
func TestEvaluateExplains(t *testing.T) {
	trig := func(id string, prio int, status, typ, conds string) Trigger {
		return Trigger{TriggerID: id, TriggerSpec: TriggerSpec{Name: id, AgentID: "agent-" + id, EventType: typ,
			Conditions: conditions(t, conds), Priority: ptr(prio), Status: status}}
	}
	ts := []Trigger{
		trig("any-miss", 30, StatusActive, EventMessageNew, `{"any":[{"field":"message.text","operator":"contains","value":"refund"}]}`),
		trig("all-miss", 20, StatusActive, EventMessageNew,
			`{"all":[{"field":"message.direction","operator":"eq","value":"inbound"},{"field":"message.channel","operator":"eq","value":"sms"}]}`),
		trig("off", 0, StatusInactive, EventMessageNew, `{}`),
		trig("hook", 5, StatusActive, EventWebhook, `{}`),
		trig("yes", 40, StatusActive, EventMessageNew, `{"all":[{"field":"message.direction","operator":"eq","value":"inbound"}]}`),
	}
	ev := event(t, `{"message":{"direction":"inbound","channel":"email","text":"hello"}}`)
	got := Evaluate(ts, EventMessageNew, ev)
	type row struct {
		id, failed string
		matched    bool
	}
	want := []row{{"off", FailedDisabled, false}, {"hook", FailedEventType, false}, {"all-miss", FailedAll, false},
		{"any-miss", FailedAny, false}, {"yes", "", true}}
	if len(got) != len(want) {
		t.Fatalf("%d considered, want %d", len(got), len(want))
	}
	for i, w := range want {
		if c := got[i]; c.TriggerID != w.id || c.Failed != w.failed || c.Matched != w.matched || c.AgentID != "agent-"+w.id {
			t.Fatalf("considered[%d] = %+v, want %+v", i, c, w)
		}
	}
	if c := got[2].Condition; c == nil || c.Field != "message.channel" || c.Value != "sms" {
		t.Fatalf("all-miss names condition %+v, want the channel one", c)
	}
	if got[3].Condition != nil || got[4].Condition != nil {
		t.Fatal("only a failed all condition is named")
	}
	if m := Match(ts, EventMessageNew, ev); len(m) != 1 || m[0].TriggerID != "yes" {
		t.Fatalf("Match disagrees with Evaluate: %v", m)
	}
}

func TestTriggerDefinitionRoundTrip(t *testing.T) {
	at := time.Date(2026, 11, 25, 20, 0, 0, 0, time.UTC)
	tr := Trigger{TriggerID: "trg-1", TenantID: "acme", TriggerSpec: validTrigger(), Version: 1, CreatedAt: at, UpdatedAt: at}
	tr.Conditions = conditions(t, seedConditions)
	d, err := tr.Definition()
	if err != nil {
		t.Fatal(err)
	}
	if err := store.Validate(store.IndexDefinitions, d); err != nil || d.Kind != store.KindTrigger || d.Status != StatusActive {
		t.Fatalf("definition %+v: %v", d, err)
	}
	back, err := TriggerOf(d)
	if err != nil {
		t.Fatal(err)
	}
	g, _ := json.Marshal(back)
	w, _ := json.Marshal(tr)
	if string(g) != string(w) {
		t.Fatalf("round trip:\n got %s\nwant %s", g, w)
	}
	ev := event(t, `{"channel":{"platform":"facebook"},"conversation":{"status":"open"},"message":{"direction":"inbound","text":"help"}}`)
	if !back.Conditions.Eval(ev) {
		t.Fatal("stored conditions do not hold for the seed's event")
	}
	if _, err := AgentOf(d); err == nil {
		t.Fatal("a trigger's definition read as an agent")
	}
}
