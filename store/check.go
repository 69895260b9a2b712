package store

// The document types agentbus builds itself are checked in Go rather than
// against their JSON Schema: for a value of one of these types the schema
// can only fail on what the checks below test (an empty id, a value outside
// an enum, a negative integer, a json.RawMessage that is not an object, a
// required time that omitzero dropped). Types, formats and
// additionalProperties hold by construction: a struct has no other
// properties, and a time.Time that json.Marshal accepts is an RFC 3339
// date-time. TestTypedCheckMatchesSchema keeps the schemas the
// specification: it compares both verdicts on generated documents.

var (
	planStatuses = newEnum(PlanStatusPending, PlanStatusPlanning, PlanStatusExecuting,
		PlanStatusReplanning, PlanStatusComplete, PlanStatusFailed, PlanStatusAwaitingGate, PlanStatusPaused,
		PlanStatusRejected, PlanStatusExpired)
	stepStatuses = newEnum(StepStatusPending, StepStatusRunning, StepStatusComplete,
		StepStatusFailed, StepStatusRevised, StepStatusAwaitingGate)
)

// typedIndex returns the index of doc if doc is a document type checked in
// Go, or "" for any other value (a pointer, a map, json.RawMessage …).
func typedIndex(doc any) string {
	switch doc.(type) {
	case Memory:
		return IndexMemory
	case Plan:
		return IndexPlans
	case Event:
		return IndexEvents
	case Soul:
		return IndexSouls
	case Session:
		return IndexSessions
	}
	return ""
}

// check records the violations of doc, one of the types typedIndex names.
func (c *checker) check(doc any) {
	switch d := doc.(type) {
	case Memory:
		d.check(c)
	case Plan:
		d.check(c)
	case Event:
		d.check(c)
	case Soul:
		d.check(c)
	case Session:
		d.check(c)
	}
}

// Each check below visits the properties in byte order of their JSON names.

func (m Memory) check(c *checker) {
	c.required("created_at", !m.CreatedAt.IsZero())
	c.id("id", m.ID)
	c.id("key", m.Key)
	c.nonNegative(field("step_index"), m.StepIndex)
	c.id("tenant_id", m.TenantID)
}

func (p Plan) check(c *checker) {
	c.id("plan_id", p.PlanID)
	c.nonNegative(field("replan_count"), p.ReplanCount)
	c.push(field("replan_history"))
	for i, r := range p.ReplanHistory {
		c.push(item(i))
		c.nonNegative(field("attempt"), r.Attempt)
		c.pop()
	}
	c.pop()
	c.id("session_id", p.SessionID)
	c.oneOf("status", p.Status, planStatuses)
	c.push(field("steps"))
	for i := range p.Steps {
		c.push(item(i))
		p.Steps[i].check(c)
		c.pop()
	}
	c.pop()
	c.id("tenant_id", p.TenantID)
	// A zero Usage is omitted and has nothing negative either.
	u := p.Usage
	c.push(field("usage"))
	c.nonNegative(field("cached_input_tokens"), u.CachedInputTokens)
	c.nonNegativeNumber("cost_usd", u.CostUSD)
	c.nonNegative(field("input_tokens"), u.InputTokens)
	c.nonNegative(field("model_calls"), u.Calls)
	c.nonNegative(field("output_tokens"), u.OutputTokens)
	c.pop()
}

func (s PlanStep) check(c *checker) {
	c.push(field("input_from_step"))
	for i, n := range s.InputFromStep {
		c.nonNegative(item(i), n)
	}
	c.pop()
	c.object("return_spec", s.ReturnSpec)
	if s.Status != "" { // omitempty
		c.oneOf("status", s.Status, stepStatuses)
	}
	c.nonNegative(field("step_index"), s.StepIndex)
}

func (ev Event) check(c *checker) {
	c.nonNegativeNumber("cost_usd", ev.CostUSD)
	c.nonNegative64(field("duration_ms"), ev.DurationMS)
	c.id("event_id", ev.EventID)
	c.id("event_type", ev.EventType)
	c.nonNegative(field("input_size_bytes"), ev.InputBytes)
	c.nonNegative(field("input_tokens"), ev.InputTokens)
	c.nonNegative(field("output_tokens"), ev.OutputTokens)
	c.object("payload", ev.Payload)
	c.nonNegative(field("replans"), ev.Replans)
	c.nonNegative(field("response_size_bytes"), ev.ResponseBytes)
	c.id("tenant_id", ev.TenantID)
	c.required("ts", !ev.TS.IsZero())
}

func (s Soul) check(c *checker) {
	c.id("id", s.ID)
	c.object("policies", s.Policies)
	c.id("tenant_id", s.TenantID)
}

func (s Session) check(c *checker) {
	c.id("session_id", s.SessionID)
	c.id("tenant_id", s.TenantID)
}
