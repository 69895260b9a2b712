package store

import (
	"bytes"
	"errors"
	"math"
	"math/rand/v2"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	json "github.com/go-json-experiment/json/v1"

	"github.com/agentbus/agentbus/domain"
	"github.com/agentbus/agentbus/schema"
)

// sameVerdict fails unless Encode, which checks doc in Go, returns exactly
// what encoding it through the JSON Schema of index returns: the same JSON,
// or an equal *SchemaError (field, reason and every violation). It returns
// the reference error.
func sameVerdict(t *testing.T, index string, doc any) error {
	t.Helper()
	if got := typedIndex(doc); got != index {
		t.Fatalf("%T is not checked in Go for %s (typedIndex %q)", doc, index, got)
	}
	want, wantErr := encodeWithSchema(index, doc)
	got, gotErr := Encode(index, doc)
	if !bytes.Equal(got, want) || !reflect.DeepEqual(gotErr, wantErr) {
		raw, _ := json.Marshal(doc)
		t.Fatalf("%s %s\n typed:  %v\n schema: %v", index, raw, describe(gotErr), describe(wantErr))
	}
	return wantErr
}

// describe renders err with its violations, for failure messages.
func describe(err error) string {
	var verr *schema.ValidationError
	if errors.As(err, &verr) {
		return err.Error() + " | " + verr.Error()
	}
	if err == nil {
		return "valid"
	}
	return err.Error()
}

func TestTypedCheckTable(t *testing.T) {
	plan := func(mod func(*Plan)) Plan {
		p := Plan{PlanID: "p", SessionID: "s", TenantID: "t", Status: PlanStatusPending}
		mod(&p)
		return p
	}
	steps := make([]PlanStep, 12)
	for i := range steps {
		steps[i].StepIndex = i
	}
	steps[2].Status, steps[10].Status, steps[10].StepIndex = "x", "y", -1
	event := Event{EventID: "e", TenantID: "t", EventType: "x", TS: t0}
	cases := []struct {
		name, index string
		doc         any
	}{
		{"plan everything wrong", IndexPlans, Plan{Status: "bogus", ReplanCount: -2,
			Steps:         []PlanStep{{StepIndex: -1, Status: "x", ReturnSpec: json.RawMessage(`null`), InputFromStep: []int{1, -3}}},
			ReplanHistory: []ReplanRecord{{Attempt: -1}}, Usage: domain.Usage{CostUSD: -0.5, InputTokens: -1234567}}},
		{"plan steps sorted numerically", IndexPlans, plan(func(p *Plan) { p.Steps = steps })},
		{"plan empty status", IndexPlans, plan(func(p *Plan) { p.Status = "" })},
		{"plan step status of the plan enum", IndexPlans, plan(func(p *Plan) { p.Steps = []PlanStep{{Status: "executing"}} })},
		{"plan status of the step enum", IndexPlans, plan(func(p *Plan) { p.Status = StepStatusRevised })},
		{"plan negative zero cost", IndexPlans, plan(func(p *Plan) { p.Usage.CostUSD = math.Copysign(0, -1) })},
		{"plan tiny negative cost", IndexPlans, plan(func(p *Plan) { p.Usage.CostUSD = -5e-324 })},
		{"plan NaN cost", IndexPlans, plan(func(p *Plan) { p.Usage.CostUSD = math.NaN(); p.PlanID = "" })},
		{"plan min int", IndexPlans, plan(func(p *Plan) { p.ReplanCount = math.MinInt })},
		{"plan negative failed_step", IndexPlans, plan(func(p *Plan) { p.ReplanHistory = []ReplanRecord{{FailedStep: -1}} })},
		{"plan return_spec spaced object", IndexPlans, plan(func(p *Plan) {
			p.Steps = []PlanStep{{ReturnSpec: json.RawMessage(" \n{\"a\": 1}")}}
		})},
		{"plan return_spec empty", IndexPlans, plan(func(p *Plan) { p.Steps = []PlanStep{{ReturnSpec: json.RawMessage{}}} })},
		{"memory everything wrong", IndexMemory, Memory{StepIndex: -1}},
		{"memory zero time elsewhere", IndexMemory, Memory{ID: "m", TenantID: "t", Key: "k",
			CreatedAt: time.Time{}.In(time.FixedZone("x", 3600))}},
		{"memory NaN embedding", IndexMemory, Memory{Embedding: []float32{float32(math.NaN())}}},
		{"event payload null", IndexEvents, Event{EventID: "e", TenantID: "t", EventType: "x", TS: t0, Payload: json.RawMessage(`null`)}},
		{"event payload number", IndexEvents, Event{EventID: "e", TenantID: "t", EventType: "x", TS: t0, Payload: json.RawMessage(`12`)}},
		{"event payload not JSON", IndexEvents, Event{TS: t0, Payload: json.RawMessage(`{`)}},
		{"event everything wrong", IndexEvents, Event{Payload: json.RawMessage(`[true]`)}},
		{"event year 10000", IndexEvents, Event{EventID: "e", TenantID: "t", EventType: "x", TS: t0.AddDate(8000, 0, 0)}},
		{"event zone +24:00", IndexEvents, Event{EventID: "e", TenantID: "t", EventType: "x", TS: t0.In(time.FixedZone("x", 24*3600))}},
		{"event year 0 odd zone", IndexEvents, Event{EventID: "e", TenantID: "t", EventType: "x",
			TS: time.Date(0, 2, 29, 23, 59, 59, 1, time.FixedZone("x", -(23*3600+59*60+59)))}},
		{"event valid", IndexEvents, event},
		{"event figures negative", IndexEvents, Event{EventID: "e", TenantID: "t", EventType: "x", TS: t0,
			Replans: -1, DurationMS: math.MinInt64, InputBytes: -2, ResponseBytes: -3, InputTokens: -4,
			OutputTokens: -5, CostUSD: -0.25, LargeResponse: true}},
		{"event negative duration only", IndexEvents, Event{EventID: "e", TenantID: "t", EventType: "x", TS: t0, DurationMS: -1}},
		{"event negative zero cost", IndexEvents, Event{EventID: "e", TenantID: "t", EventType: "x", TS: t0, CostUSD: math.Copysign(0, -1)}},
		{"event figures valid", IndexEvents, Event{EventID: "e", TenantID: "t", EventType: "run.finished", TS: t0,
			Outcome: "ok", TaskType: "research", Replans: 2, DurationMS: math.MaxInt64, InputBytes: 10, ResponseBytes: 1 << 40,
			LargeResponse: true, InputTokens: 1200, OutputTokens: 300, CostUSD: 0.0042}},
		{"soul policies array", IndexSouls, Soul{ID: "s", TenantID: "t", Policies: json.RawMessage(`[]`)}},
		{"soul policies string", IndexSouls, Soul{Policies: json.RawMessage(`"x"`)}},
		{"session everything wrong", IndexSessions, Session{Messages: []SessionMessage{{TS: t0}}}},
		{"session invalid UTF-8 ids", IndexSessions, Session{SessionID: "\xff", TenantID: "\x00"}},
	}
	for index, doc := range validDocs() {
		cases = append(cases, struct {
			name, index string
			doc         any
		}{"valid " + index, index, doc})
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) { sameVerdict(t, c.index, c.doc) })
	}
}

// typedMakers generate a document of each typed index.
var typedMakers = map[string]func(*gen) any{
	IndexMemory:   func(g *gen) any { return g.memory() },
	IndexPlans:    func(g *gen) any { return g.plan() },
	IndexEvents:   func(g *gen) any { return g.event() },
	IndexSouls:    func(g *gen) any { return g.soul() },
	IndexSessions: func(g *gen) any { return g.session() },
}

// generatedDocs is how many documents of each index a randomized test
// generates.
func generatedDocs() int {
	if testing.Short() {
		return 300
	}
	return 3000
}

// TestTypedCheckMatchesSchema generates documents of every typed index,
// valid and invalid, and compares the Go check with the JSON Schema. It
// also requires every check to have been exercised.
func TestTypedCheckMatchesSchema(t *testing.T) {
	n := generatedDocs()
	wantFields := map[string][]string{
		IndexMemory: {"", "/created_at", "/id", "/key", "/step_index", "/tenant_id"},
		IndexPlans: {"", "/plan_id", "/replan_count", "/replan_history/N/attempt", "/session_id", "/status",
			"/steps/N/input_from_step/N", "/steps/N/return_spec", "/steps/N/status", "/steps/N/step_index",
			"/tenant_id", "/usage/cached_input_tokens", "/usage/cost_usd", "/usage/input_tokens",
			"/usage/model_calls", "/usage/output_tokens"},
		IndexEvents: {"", "/cost_usd", "/duration_ms", "/event_id", "/event_type", "/input_size_bytes",
			"/input_tokens", "/output_tokens", "/payload", "/replans", "/response_size_bytes", "/tenant_id", "/ts"},
		IndexSouls:    {"", "/id", "/policies", "/tenant_id"},
		IndexSessions: {"", "/session_id", "/tenant_id"},
	}
	digits := regexp.MustCompile(`/[0-9]+`)
	for index, make := range typedMakers {
		t.Run(index, func(t *testing.T) {
			g := &gen{r: rand.New(rand.NewPCG(20250102, uint64(len(index))))}
			seen := map[string]bool{}
			valid := 0
			for range n {
				g.bad = []float64{0, 0.03, 0.1, 0.4}[g.r.IntN(4)]
				err := sameVerdict(t, index, make(g))
				var se *SchemaError
				switch {
				case err == nil:
					valid++
				case errors.As(err, &se):
					seen[digits.ReplaceAllString(se.Field, "/N")] = true
					var verr *schema.ValidationError
					if errors.As(err, &verr) {
						for _, v := range verr.Violations {
							seen[digits.ReplaceAllString(v.Field, "/N")] = true
						}
					}
				default:
					t.Fatalf("unexpected error %v", err)
				}
			}
			for _, f := range wantFields[index] {
				if !seen[f] {
					t.Errorf("no generated document failed on %q", f)
				}
			}
			if valid < n/10 || valid > n*9/10 {
				t.Errorf("%d of %d documents valid: the generator is lopsided", valid, n)
			}
			t.Logf("%d documents, %d valid, fields %v", n, valid, slices.Sorted(mapKeys(seen)))
		})
	}
}

func mapKeys(m map[string]bool) func(func(string) bool) {
	return func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

// TestEncodeTypedAllocs checks that a valid typed document costs no more
// allocations than json.Marshal of it.
func TestEncodeTypedAllocs(t *testing.T) {
	for _, doc := range []any{benchEvent(), benchPlan()} {
		index := typedIndex(doc)
		// The fewest of three measurements: AllocsPerRun counts every
		// allocation of the process, and a background one (the runtime,
		// the race detector) can land in any single measurement.
		least := func(f func()) float64 {
			n := testing.AllocsPerRun(50, f)
			for range 2 {
				n = min(n, testing.AllocsPerRun(50, f))
			}
			return n
		}
		marshal := least(func() { _, _ = json.Marshal(doc) })
		encode := least(func() {
			if _, err := Encode(index, doc); err != nil {
				t.Fatal(err)
			}
		})
		// A couple of allocations of slack: the race detector and the
		// interface conversion add one; the schema path added ~100.
		if encode > marshal+2 {
			t.Errorf("%s: Encode %v allocs, json.Marshal %v", index, encode, marshal)
		}
	}
}

func TestEncodeUntypedStillValidated(t *testing.T) {
	if _, err := Encode("", Event{}); !errors.Is(err, ErrUnknownIndex) {
		t.Fatalf("empty index: %v", err)
	}
	if _, err := Encode(IndexPlans, validDocs()[IndexEvents]); !errors.Is(err, ErrSchema) {
		t.Fatalf("event as a plan: %v", err)
	}
	ev := validDocs()[IndexEvents].(Event)
	ev.EventID = ""
	for _, doc := range []any{&ev, map[string]any{"event_id": ""}} {
		var se *SchemaError
		if _, err := Encode(IndexEvents, doc); !errors.As(err, &se) || !strings.HasPrefix(se.Field, "/event_id") {
			t.Fatalf("%T: %v", doc, err)
		}
	}
}

// TestValidateMatchesEncode generates documents of every typed index,
// valid, invalid and not encodable, and requires Validate, which encodes
// nothing, to give Encode's verdict: nil for nil, the same *SchemaError
// for a violation, a not-encodable *SchemaError where json.Marshal refuses.
func TestValidateMatchesEncode(t *testing.T) {
	n := generatedDocs()
	const unencodable = "document is not JSON-encodable: "
	for index, make := range typedMakers {
		t.Run(index, func(t *testing.T) {
			g := &gen{r: rand.New(rand.NewPCG(20261126, uint64(len(index))))}
			refused := 0
			for range n {
				g.bad = []float64{0, 0.1, 0.4, 1}[g.r.IntN(4)]
				doc := make(g)
				_, want := Encode(index, doc)
				got := Validate(index, doc)
				var ws, gs *SchemaError
				switch {
				case want == nil && got == nil:
				case errors.As(want, &ws) && strings.HasPrefix(ws.Reason, unencodable):
					refused++
					if !errors.As(got, &gs) || !strings.HasPrefix(gs.Reason, unencodable) || gs.Index != index {
						raw, _ := json.Marshal(doc)
						t.Fatalf("json.Marshal refuses %+v (%v), Validate gives %v (%s)", doc, want, got, raw)
					}
				case !reflect.DeepEqual(got, want):
					raw, _ := json.Marshal(doc)
					t.Fatalf("%s %s\n Validate: %v\n Encode:   %v", index, raw, describe(got), describe(want))
				}
			}
			if refused == 0 {
				t.Errorf("no generated %s document was refused by json.Marshal", index)
			}
		})
	}
	// Any other value goes through the JSON Schema.
	if err := Validate(IndexEvents, map[string]any{"event_id": ""}); !errors.Is(err, ErrSchema) {
		t.Errorf("an untyped document: %v", err)
	}
	if err := Validate(IndexPlans, validDocs()[IndexEvents]); !errors.Is(err, ErrSchema) {
		t.Errorf("an event as a plan: %v", err)
	}
}
