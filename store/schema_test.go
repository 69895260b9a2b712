package store

import (
	"errors"
	"strings"
	"testing"
	"time"

	json "github.com/go-json-experiment/json/v1"
)

var t0 = time.Date(2025, 1, 2, 3, 4, 5, 123456789, time.UTC)

func validDocs() map[string]any {
	return map[string]any{
		IndexMemory: Memory{ID: "m1", TenantID: "t", Key: "t:s:k", Text: `{"a":1}`, CreatedAt: t0,
			Embedding: []float32{0.5, -1}, StepIndex: 3, LockExpires: t0.In(time.FixedZone("x", 7200))},
		IndexPlans: Plan{PlanID: "p", TenantID: "t", SessionID: "s", Status: PlanStatusExecuting,
			Steps: []PlanStep{{StepIndex: 0, Status: StepStatusRevised, ReturnSpec: json.RawMessage(`{"any":{"nested":true}}`),
				InputFromStep: []int{1, 2}, Validated: true}},
			ReplanHistory: []ReplanRecord{{Attempt: 1, FailedStep: 0, RevisedAt: t0}}},
		IndexEvents:   Event{EventID: "e", TenantID: "t", EventType: "x", TS: t0, Payload: json.RawMessage(`{"k":[1,2]}`)},
		IndexSouls:    Soul{ID: "s", TenantID: "t", Persona: Persona{Name: "n"}, Policies: json.RawMessage(`{"free":"form"}`)},
		IndexSessions: Session{SessionID: "s", TenantID: "t", Messages: []SessionMessage{{Role: "user", TS: t0}}},
	}
}

func TestValidateAcceptsValidDocs(t *testing.T) {
	for index, doc := range validDocs() {
		if err := Validate(index, doc); err != nil {
			t.Errorf("%s: %v", index, err)
		}
		if err := Validate(index, &doc); err != nil {
			t.Errorf("%s via pointer: %v", index, err)
		}
	}
}

func TestValidateViolations(t *testing.T) {
	cases := []struct {
		name, index string
		doc         any
		field       string
	}{
		{"plan bad status", IndexPlans, Plan{PlanID: "p", TenantID: "t", SessionID: "s", Status: "bogus"}, "/status"},
		{"plan missing tenant", IndexPlans, Plan{PlanID: "p", SessionID: "s", Status: "pending"}, "/tenant_id"},
		{"plan bad step status", IndexPlans, Plan{PlanID: "p", TenantID: "t", SessionID: "s", Status: "pending",
			Steps: []PlanStep{{StepIndex: 0}, {StepIndex: 1, Status: "nope"}}}, "/steps/1/status"},
		{"plan negative step", IndexPlans, Plan{PlanID: "p", TenantID: "t", SessionID: "s", Status: "pending",
			Steps: []PlanStep{{StepIndex: -1}}}, "/steps/0/step_index"},
		{"plan return_spec not object", IndexPlans, Plan{PlanID: "p", TenantID: "t", SessionID: "s", Status: "pending",
			Steps: []PlanStep{{ReturnSpec: json.RawMessage(`[1]`)}}}, "/steps/0/return_spec"},
		{"memory missing created_at", IndexMemory, Memory{ID: "m", TenantID: "t", Key: "k"}, "/created_at"},
		{"memory empty key", IndexMemory, Memory{ID: "m", TenantID: "t", CreatedAt: t0}, "/key"},
		{"event missing ts", IndexEvents, Event{EventID: "e", TenantID: "t", EventType: "x"}, "/ts"},
		{"event payload not object", IndexEvents, Event{EventID: "e", TenantID: "t", EventType: "x", TS: t0,
			Payload: json.RawMessage(`"s"`)}, "/payload"},
		{"soul empty id", IndexSouls, Soul{TenantID: "t"}, "/id"},
		{"session missing tenant", IndexSessions, Session{SessionID: "s"}, "/tenant_id"},
		{"unknown field", IndexSessions, map[string]any{"session_id": "s", "tenant_id": "t", "extra": 1}, "/extra"},
		{"nested unknown field", IndexSouls, map[string]any{"id": "s", "tenant_id": "t",
			"persona": map[string]any{"mood": "x"}}, "/persona/mood"},
		{"bad date", IndexEvents, json.RawMessage(`{"event_id":"e","tenant_id":"t","event_type":"x","ts":"yesterday"}`), "/ts"},
		{"wrong type", IndexMemory, json.RawMessage(`{"id":"m","tenant_id":"t","key":"k","text":"x","created_at":"2025-01-01T00:00:00Z","step_index":1.5}`), "/step_index"},
		{"not an object", IndexMemory, []int{1}, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := Validate(c.index, c.doc)
			var se *SchemaError
			if !errors.As(err, &se) {
				t.Fatalf("got %v, want *SchemaError", err)
			}
			if !errors.Is(err, ErrSchema) {
				t.Fatalf("%v does not match ErrSchema", err)
			}
			if se.Index != c.index || se.Field != c.field || se.Reason == "" {
				t.Fatalf("got %+v, want index %s field %q", se, c.index, c.field)
			}
			if !strings.HasPrefix(err.Error(), "store: schema violation") {
				t.Fatalf("message %q", err)
			}
		})
	}
}

func TestValidateDeterministicFirstField(t *testing.T) {
	doc := Plan{Status: "bogus", Steps: []PlanStep{{StepIndex: -1, Status: "x"}}}
	var first string
	for i := range 20 {
		var se *SchemaError
		if !errors.As(Validate(IndexPlans, doc), &se) {
			t.Fatal("expected a schema error")
		}
		if i == 0 {
			first = se.Field
		} else if se.Field != first {
			t.Fatalf("first field changed from %q to %q", first, se.Field)
		}
	}
	if first != "/plan_id" {
		t.Fatalf("first field %q, want /plan_id", first)
	}
}

func TestValidateUnknownIndex(t *testing.T) {
	err := Validate("nope", map[string]any{})
	if !errors.Is(err, ErrUnknownIndex) || errors.Is(err, ErrSchema) {
		t.Fatalf("got %v", err)
	}
	if _, err := SchemaJSON("nope"); !errors.Is(err, ErrUnknownIndex) {
		t.Fatalf("SchemaJSON: %v", err)
	}
	for _, index := range Indexes() {
		raw, err := SchemaJSON(index)
		if err != nil || !json.Valid(raw) {
			t.Fatalf("SchemaJSON(%s): %v", index, err)
		}
	}
}

func TestJSONFieldNames(t *testing.T) {
	raw, err := json.Marshal(Memory{ID: "x", Version: Version{SeqNo: 3, PrimaryTerm: 1}})
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(raw), "Version") || strings.Contains(string(raw), "created_at") {
		t.Fatalf("unexpected fields in %s", raw)
	}
}

// TestValidateDefinitions: a Definition is validated against its JSON
// Schema (it is not one of the types checked in Go).
func TestValidateDefinitions(t *testing.T) {
	valid := Definition{TenantID: "t", Kind: KindAgent, ID: "a", Version: 1, Spec: json.RawMessage(`{"x":1}`),
		CreatedAt: t0, UpdatedAt: t0}
	if err := Validate(IndexDefinitions, valid); err != nil {
		t.Fatalf("valid definition: %v", err)
	}
	for _, c := range []struct {
		name  string
		edit  func(*Definition)
		field string
	}{
		{"no tenant", func(d *Definition) { d.TenantID = "" }, "/tenant_id"},
		{"unknown kind", func(d *Definition) { d.Kind = "robot" }, "/kind"},
		{"no id", func(d *Definition) { d.ID = "" }, "/id"},
		{"version 0", func(d *Definition) { d.Version = 0 }, "/version"},
		{"no spec", func(d *Definition) { d.Spec = nil }, "/spec"},
		{"array spec", func(d *Definition) { d.Spec = json.RawMessage(`[1]`) }, "/spec"},
		{"no update time", func(d *Definition) { d.UpdatedAt = time.Time{} }, "/updated_at"},
	} {
		d := valid
		c.edit(&d)
		var se *SchemaError
		if err := Validate(IndexDefinitions, d); !errors.As(err, &se) || se.Field != c.field {
			t.Errorf("%s: got %v, want a schema error on %q", c.name, err, c.field)
		}
	}
}
