package store

import (
	"math"
	"math/rand/v2"
	"time"

	json "github.com/go-json-experiment/json/v1"

	"github.com/agentbus/agentbus/domain"
)

// gen generates typed documents for TestTypedCheckMatchesSchema. Each
// constrained field is given a value the schema refuses with probability
// bad; the unconstrained ones take any value, including the awkward ones
// (invalid UTF-8, escapes). With probability bad/50 a field takes a value
// json.Marshal refuses (NaN, invalid raw JSON, a year past 9999).
type gen struct {
	r   *rand.Rand
	bad float64
}

var (
	goodIDs    = []string{"x", "tenant-1", "é", "\xff", " ", "a/b~c", `q"'`, "\x00"}
	anyStrings = []string{"", "x", "\xff", "ünï", "<&>", "line\nbreak", `"'`}
	badEnums   = []string{"", "bogus", "Pending", "pending ", "complete\x00", "\xff", "executing", "revised", "running"}
	goodInts   = []int{0, 1, 7, 1 << 53, math.MaxInt}
	badInts    = []int{-1, -7, -1234567, -(1 << 53) - 1, math.MinInt}
	goodFloats = []float64{0, math.Copysign(0, -1), 0.0042, 5e-324, 1e300, math.MaxFloat64}
	badFloats  = []float64{-5e-324, -1e-300, -0.5, -1234567.25, -math.MaxFloat64}
	nanFloats  = []float64{math.NaN(), math.Inf(1), math.Inf(-1)}
	objects    = []string{"", "{}", ` {"a":1}`, "{\"nested\":{\"x\":[1,null]}}\n"}
	nonObjects = []string{"[]", "[1]", `"s"`, "null", " null", "0", "-1.5e3", "true", "false"}
	notJSON    = []string{"{", "  ", "nul", `{"a":1}x`}
	zones      = []*time.Location{time.UTC, time.FixedZone("ist", 5*3600+1800), time.FixedZone("lmt", 561),
		time.FixedZone("max", 23*3600+59*60+59), time.FixedZone("min", -(23*3600 + 59*60 + 59))}
)

func pick[T any](r *rand.Rand, xs []T) T { return xs[r.IntN(len(xs))] }

func (g *gen) flip() bool { return g.r.Float64() < g.bad }

// broken reports whether this field takes a value json.Marshal refuses.
func (g *gen) broken() bool { return g.r.Float64() < g.bad/50 }

func (g *gen) id() string {
	if g.flip() {
		return ""
	}
	return pick(g.r, goodIDs)
}

func (g *gen) str() string { return pick(g.r, anyStrings) }

func (g *gen) oneOf(valid ...string) string {
	if g.flip() {
		return pick(g.r, badEnums)
	}
	return pick(g.r, valid)
}

func (g *gen) integer() int {
	if g.flip() {
		return pick(g.r, badInts)
	}
	if g.r.IntN(2) == 0 {
		return 0
	}
	return pick(g.r, goodInts)
}

func (g *gen) number() float64 {
	switch {
	case g.broken():
		return pick(g.r, nanFloats)
	case g.flip():
		return pick(g.r, badFloats)
	}
	return pick(g.r, goodFloats)
}

// object returns a json.RawMessage for a {"type": "object"} property.
func (g *gen) object() json.RawMessage {
	switch {
	case g.broken():
		return json.RawMessage(pick(g.r, notJSON))
	case g.flip():
		return json.RawMessage(pick(g.r, nonObjects))
	case g.r.IntN(4) == 0:
		return nil
	}
	return json.RawMessage(pick(g.r, objects))
}

// date returns a time; required times are zero (so omitted) when bad.
func (g *gen) date(required bool) time.Time {
	switch {
	case g.broken():
		return pick(g.r, []time.Time{t0.AddDate(8000, 0, 0), time.Date(-1, 1, 1, 0, 0, 0, 0, time.UTC),
			t0.In(time.FixedZone("x", 24*3600))})
	case required && g.flip(), !required && g.r.IntN(3) == 0:
		return pick(g.r, []time.Time{{}, time.Time{}.In(zones[1])})
	}
	return pick(g.r, []time.Time{t0, time.Unix(0, 0), time.Date(0, 1, 1, 0, 0, 0, 0, time.UTC),
		time.Date(9999, 12, 31, 23, 59, 59, 999999999, time.UTC)}).In(pick(g.r, zones))
}

// count returns a slice length, mostly small.
func (g *gen) count() int { return pick(g.r, []int{0, 0, 1, 1, 2, 3, 11}) }

func (g *gen) memory() Memory {
	m := Memory{ID: g.id(), TenantID: g.id(), SessionID: g.str(), TaskID: g.str(), UserID: g.str(),
		Scope: g.str(), Key: g.id(), Text: g.str(), Source: g.str(), StepIndex: g.integer(), PlanID: g.str(),
		LockedBy: g.str(), LockExpires: g.date(false), CreatedAt: g.date(true), TTLAt: g.date(false)}
	for range g.count() {
		f := float32(g.number())
		if math.IsInf(float64(f), 0) && !g.broken() {
			f = 1
		}
		m.Embedding = append(m.Embedding, f)
	}
	return m
}

func (g *gen) plan() Plan {
	p := Plan{PlanID: g.id(), SessionID: g.id(), TenantID: g.id(), UserID: g.str(),
		Status:    g.oneOf(PlanStatusPending, PlanStatusPlanning, PlanStatusExecuting, PlanStatusReplanning, PlanStatusComplete, PlanStatusFailed, PlanStatusAwaitingGate, PlanStatusPaused, PlanStatusRejected, PlanStatusExpired),
		CreatedAt: g.date(false), CompletedAt: g.date(false)}
	if g.r.IntN(2) == 0 {
		p.ReplanCount = g.integer()
	}
	for range g.count() {
		p.Steps = append(p.Steps, g.step())
	}
	for range g.count() {
		p.ReplanHistory = append(p.ReplanHistory, ReplanRecord{Attempt: g.integer(), Trigger: g.str(),
			FailedStep: pick(g.r, []int{0, 3, -1, math.MinInt}), Reason: g.str(), RevisedAt: g.date(false)})
	}
	if g.r.IntN(3) > 0 {
		p.Usage = domain.Usage{InputTokens: g.integer(), OutputTokens: g.integer(),
			CachedInputTokens: g.integer(), CostUSD: g.number(), Calls: g.integer()}
	}
	return p
}

func (g *gen) step() PlanStep {
	s := PlanStep{StepIndex: g.integer(), Task: g.str(), ReturnSpec: g.object(), TaskID: g.str(),
		MemoryKey: g.str(), Validated: g.r.IntN(2) == 0, FailureReason: g.str(),
		StartedAt: g.date(false), FinishedAt: g.date(false)}
	if g.r.IntN(3) > 0 {
		s.Status = g.oneOf(StepStatusPending, StepStatusRunning, StepStatusComplete, StepStatusFailed, StepStatusRevised, StepStatusAwaitingGate)
	}
	for range g.count() {
		s.Skills = append(s.Skills, g.str())
	}
	for range g.count() {
		s.InputFromStep = append(s.InputFromStep, g.integer())
	}
	if s.InputFromStep == nil && g.r.IntN(4) == 0 {
		s.InputFromStep = []int{}
	}
	return s
}

func (g *gen) event() Event {
	ev := Event{EventID: g.id(), TenantID: g.id(), SessionID: g.str(), PlanID: g.str(), TaskID: g.str(),
		EventType: g.id(), SkillID: g.str(), ScriptHash: g.str(), Payload: g.object(), TS: g.date(true),
		Outcome: g.str(), TaskType: g.str(), LargeResponse: g.r.IntN(2) == 0}
	// Most events carry few of the figures: each is set half the time.
	for _, set := range []func(){
		func() { ev.Replans = g.integer() },
		func() { ev.DurationMS = int64(g.integer()) },
		func() { ev.InputBytes = g.integer() },
		func() { ev.ResponseBytes = g.integer() },
		func() { ev.InputTokens = g.integer() },
		func() { ev.OutputTokens = g.integer() },
		func() { ev.CostUSD = g.number() },
	} {
		if g.r.IntN(2) == 0 {
			set()
		}
	}
	return ev
}

func (g *gen) soul() Soul {
	return Soul{ID: g.id(), TenantID: g.id(), UserID: g.str(), Key: g.str(),
		Persona:  Persona{Name: g.str(), SystemPrompt: g.str(), Tone: g.str(), Language: g.str()},
		Policies: g.object(), UpdatedAt: g.date(false)}
}

func (g *gen) session() Session {
	s := Session{SessionID: g.id(), TenantID: g.id(), UserID: g.str(), State: g.str(),
		StartedAt: g.date(false), LastActive: g.date(false)}
	for range g.count() {
		s.Messages = append(s.Messages, SessionMessage{MsgID: g.str(), Role: g.str(), Content: g.str(), TS: g.date(false)})
	}
	return s
}
