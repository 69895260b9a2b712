package events_test

import (
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/cloudevents/sdk-go/v2/event"
	json "github.com/go-json-experiment/json/v1"
	"github.com/google/uuid"
	"github.com/nats-io/nats.go"

	"github.com/agentbus/agentbus/events"
	"github.com/agentbus/agentbus/events/eventstest"
)

var fullMeta = events.Meta{
	Tenant:        "acme",
	Session:       "sess-1",
	Run:           "run-1",
	Task:          "task-1",
	Correlation:   "corr-1",
	TraceParent:   "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
	SourceProcess: "executor-7",
}

func TestNewSetsAttributesAndExtensions(t *testing.T) {
	before := time.Now()
	ev, err := events.New("id-1", events.TypeStepRequested, fullMeta, stepMsg{Step: 3})
	if err != nil {
		t.Fatal(err)
	}
	if ev.ID() != "id-1" || ev.Type() != events.TypeStepRequested || ev.Source() != "agentbus/executor-7" {
		t.Fatalf("attributes: id=%q type=%q source=%q", ev.ID(), ev.Type(), ev.Source())
	}
	if ev.Time().Before(before.Add(-time.Second)) || ev.Time().After(time.Now().Add(time.Second)) {
		t.Fatalf("time %v is not now", ev.Time())
	}
	if ev.DataContentType() != event.ApplicationJSON {
		t.Fatalf("content type %q", ev.DataContentType())
	}
	if got := events.MetaOf(ev); got != (events.Meta{Tenant: "acme", Session: "sess-1", Run: "run-1", Task: "task-1", Correlation: "corr-1", TraceParent: fullMeta.TraceParent}) {
		t.Fatalf("MetaOf = %+v", got)
	}
	var sr stepMsg
	if err := events.Decode(ev, &sr); err != nil || sr.Step != 3 {
		t.Fatalf("Decode = %+v, %v", sr, err)
	}

	// Empty meta fields are left out, and the source has a default.
	ev, err = events.New("id-2", events.TypeRunRequested, events.Meta{Tenant: "acme"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if ev.Source() != "agentbus/agentbus" {
		t.Fatalf("default source %q", ev.Source())
	}
	if _, ok := ev.Extensions()[events.ExtSession]; ok {
		t.Fatalf("empty session was set: %v", ev.Extensions())
	}
	if len(ev.Extensions()) != 1 {
		t.Fatalf("extensions %v, want only tenantid", ev.Extensions())
	}
}

func TestNewRejectsUnencodableData(t *testing.T) {
	_, err := events.New("id", events.TypeRunRequested, events.Meta{Tenant: "acme"}, map[string]any{"c": make(chan int)})
	if err == nil {
		t.Fatal("New accepted data that cannot be JSON encoded")
	}
}

func TestToMsgBinaryMode(t *testing.T) {
	ev, err := events.New("id-42", events.TypeStepFinished, fullMeta, resultMsg{Result: stepResult{Step: 2, Outcome: "complete"}})
	if err != nil {
		t.Fatal(err)
	}
	m, err := events.ToMsg(ev)
	if err != nil {
		t.Fatal(err)
	}
	if m.Subject != "agent.step.finished.acme" {
		t.Fatalf("subject %q", m.Subject)
	}
	want := map[string]string{
		nats.MsgIdHdr:      "id-42",
		"ce-specversion":   "1.0",
		"ce-id":            "id-42",
		"ce-type":          events.TypeStepFinished,
		"ce-source":        "agentbus/executor-7",
		"ce-time":          ev.Time().UTC().Format(time.RFC3339Nano),
		"content-type":     event.ApplicationJSON,
		"ce-tenantid":      "acme",
		"ce-sessionid":     "sess-1",
		"ce-runid":         "run-1",
		"ce-taskid":        "task-1",
		"ce-correlationid": "corr-1",
		"ce-traceparent":   fullMeta.TraceParent,
	}
	for k, v := range want {
		if got := m.Header.Get(k); got != v {
			t.Errorf("header %s = %q, want %q", k, got, v)
		}
	}
	// Binary mode: the body is the data alone, not a structured envelope.
	var body map[string]any
	if err := json.Unmarshal(m.Data, &body); err != nil {
		t.Fatal(err)
	}
	if _, ok := body["specversion"]; ok {
		t.Fatalf("body is a structured-mode envelope: %s", m.Data)
	}
	if !reflect.DeepEqual(m.Data, ev.Data()) {
		t.Fatalf("body %s, want data %s", m.Data, ev.Data())
	}
}

func TestToMsgRejects(t *testing.T) {
	noID, _ := events.New("", events.TypeStepRequested, events.Meta{Tenant: "acme"}, 1)
	if _, err := events.ToMsg(noID); err == nil {
		t.Error("ToMsg accepted an event without id")
	}
	badTenant, _ := events.New("id", events.TypeStepRequested, events.Meta{Tenant: "ac.me"}, 1)
	if _, err := events.ToMsg(badTenant); !errors.Is(err, events.ErrInvalidToken) {
		t.Errorf("ToMsg with tenant ac.me: %v, want ErrInvalidToken", err)
	}
	noTenant, _ := events.New("id", events.TypeStepRequested, events.Meta{}, 1)
	if _, err := events.ToMsg(noTenant); !errors.Is(err, events.ErrInvalidToken) {
		t.Errorf("ToMsg without tenant: %v, want ErrInvalidToken", err)
	}
	unknown, _ := events.New("id", "com.example.thing.happened", events.Meta{Tenant: "acme"}, 1)
	if _, err := events.ToMsg(unknown); !errors.Is(err, events.ErrUnknownType) {
		t.Errorf("ToMsg of foreign type: %v, want ErrUnknownType", err)
	}
}

func assertSameEvent(t *testing.T, got, want event.Event) {
	t.Helper()
	if got.ID() != want.ID() || got.Type() != want.Type() || got.Source() != want.Source() || got.SpecVersion() != want.SpecVersion() {
		t.Errorf("attributes: got id=%q type=%q source=%q spec=%q, want id=%q type=%q source=%q spec=%q",
			got.ID(), got.Type(), got.Source(), got.SpecVersion(), want.ID(), want.Type(), want.Source(), want.SpecVersion())
	}
	if !got.Time().Equal(want.Time()) {
		t.Errorf("time %v, want %v", got.Time(), want.Time())
	}
	if got.DataContentType() != want.DataContentType() {
		t.Errorf("content type %q, want %q", got.DataContentType(), want.DataContentType())
	}
	if !reflect.DeepEqual(got.Extensions(), want.Extensions()) {
		t.Errorf("extensions %v, want %v", got.Extensions(), want.Extensions())
	}
	if string(got.Data()) != string(want.Data()) {
		t.Errorf("data %s, want %s", got.Data(), want.Data())
	}
}

func TestRoundTripInMemory(t *testing.T) {
	ev, err := events.New("id-rt", events.TypeStepRequested, fullMeta, stepMsg{Step: 5, Inputs: []string{"k1"}})
	if err != nil {
		t.Fatal(err)
	}
	ev.SetSubject("step-5")
	m, err := events.ToMsg(ev)
	if err != nil {
		t.Fatal(err)
	}
	got, err := events.FromMsg(m.Header, m.Data)
	if err != nil {
		t.Fatal(err)
	}
	assertSameEvent(t, got, ev)
	if got.Subject() != "step-5" {
		t.Errorf("ce subject %q", got.Subject())
	}
	var sr stepMsg
	if err := events.Decode(got, &sr); err != nil || sr.Step != 5 || len(sr.Inputs) != 1 || sr.Inputs[0] != "k1" {
		t.Fatalf("decoded %+v, %v", sr, err)
	}
}

// TestRoundTripThroughJetStream stores an event on a real server and reads
// it back, so the headers go over the wire.
func TestRoundTripThroughJetStream(t *testing.T) {
	t.Parallel()
	_, _, js := eventstest.Bootstrap(t, testTopology())
	ev, err := events.New("id-wire", events.TypeRunFinished, fullMeta, map[string]string{"run_id": "run-1", "terminal_code": "SUCCESS"})
	if err != nil {
		t.Fatal(err)
	}
	if err := events.Publish(testCtx(t), js, ev); err != nil {
		t.Fatal(err)
	}
	s, err := js.Stream(testCtx(t), events.StreamAgent)
	if err != nil {
		t.Fatal(err)
	}
	raw, err := s.GetLastMsgForSubject(testCtx(t), "agent.run.finished.acme")
	if err != nil {
		t.Fatal(err)
	}
	if raw.Header.Get(nats.MsgIdHdr) != "id-wire" {
		t.Fatalf("stored Nats-Msg-Id %q", raw.Header.Get(nats.MsgIdHdr))
	}
	got, err := events.FromMsg(raw.Header, raw.Data)
	if err != nil {
		t.Fatal(err)
	}
	assertSameEvent(t, got, ev)
}

func TestPublishDuplicateIsSuccess(t *testing.T) {
	t.Parallel()
	_, _, js := eventstest.Bootstrap(t, testTopology())
	ev, err := events.New("dup-1", events.TypeRunFinished, events.Meta{Tenant: "acme"}, "x")
	if err != nil {
		t.Fatal(err)
	}
	for range 3 {
		if err := events.Publish(testCtx(t), js, ev); err != nil {
			t.Fatalf("Publish: %v", err)
		}
	}
	if n := subjectCount(t, js, events.StreamAgent, "agent.run.finished.acme"); n != 1 {
		t.Fatalf("stream holds %d copies, want 1", n)
	}
	bad, _ := events.New("dup-2", events.TypeRunFinished, events.Meta{Tenant: "*"}, "x")
	if err := events.Publish(testCtx(t), js, bad); !events.IsPermanent(err) || !errors.Is(err, events.ErrInvalidToken) {
		t.Fatalf("Publish of unroutable event: %v, want permanent ErrInvalidToken", err)
	}
}

func TestFromMsgMixedCaseHeaders(t *testing.T) {
	h := nats.Header{}
	h["CE-SpecVersion"] = []string{"1.0"}
	h["Ce-Id"] = []string{"id-mixed"}
	h["Ce-Type"] = []string{events.TypeStepRequested}
	h["CE-SOURCE"] = []string{"agentbus/x"}
	h["Ce-Time"] = []string{"2024-05-06T07:08:09.123456789Z"}
	h["Content-Type"] = []string{"application/json"}
	h["Ce-TenantId"] = []string{"acme"}
	h["CE-RUNID"] = []string{"run-9"}
	h[nats.MsgIdHdr] = []string{"id-mixed"}
	ev, err := events.FromMsg(h, []byte(`{"step":1}`))
	if err != nil {
		t.Fatal(err)
	}
	if ev.ID() != "id-mixed" || ev.Type() != events.TypeStepRequested || ev.Source() != "agentbus/x" {
		t.Fatalf("attributes id=%q type=%q source=%q", ev.ID(), ev.Type(), ev.Source())
	}
	if want := time.Date(2024, 5, 6, 7, 8, 9, 123456789, time.UTC); !ev.Time().Equal(want) {
		t.Fatalf("time %v", ev.Time())
	}
	if m := events.MetaOf(ev); m.Tenant != "acme" || m.Run != "run-9" {
		t.Fatalf("meta %+v", m)
	}
	// Non-ce headers such as Nats-Msg-Id are not extensions.
	if len(ev.Extensions()) != 2 {
		t.Fatalf("extensions %v, want tenantid and runid", ev.Extensions())
	}
}

func TestFromMsgGarbageIsPermanentDecodeError(t *testing.T) {
	valid := func() nats.Header {
		h := nats.Header{}
		h.Set("ce-specversion", "1.0")
		h.Set("ce-id", "x")
		h.Set("ce-type", events.TypeStepRequested)
		h.Set("ce-source", "agentbus/x")
		h.Set("ce-tenantid", "acme")
		return h
	}
	cases := map[string]struct {
		header func() nats.Header
		data   []byte
	}{
		"no headers":          {func() nats.Header { return nil }, []byte(`{}`)},
		"missing specversion": {func() nats.Header { h := valid(); h.Del("ce-specversion"); return h }, []byte(`{}`)},
		"old specversion":     {func() nats.Header { h := valid(); h.Set("ce-specversion", "0.3"); return h }, []byte(`{}`)},
		"missing id":          {func() nats.Header { h := valid(); h.Del("ce-id"); return h }, []byte(`{}`)},
		"missing type":        {func() nats.Header { h := valid(); h.Del("ce-type"); return h }, []byte(`{}`)},
		"bad time":            {func() nats.Header { h := valid(); h.Set("ce-time", "yesterday"); return h }, []byte(`{}`)},
		"invalid JSON body":   {valid, []byte(`{"step":`)},
		"raw bytes body":      {valid, []byte{0xff, 0x00, 0x01}},
		"empty JSON body":     {valid, nil},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			_, err := events.FromMsg(c.header(), c.data)
			if err == nil {
				t.Fatal("FromMsg accepted garbage")
			}
			if !events.IsPermanent(err) {
				t.Errorf("error %v is not permanent", err)
			}
			if !errors.Is(err, events.ErrDecode) {
				t.Errorf("error %v does not wrap ErrDecode", err)
			}
		})
	}

	// A non-JSON content type carries opaque data.
	h := valid()
	h.Set("content-type", "text/plain")
	ev, err := events.FromMsg(h, []byte("hello"))
	if err != nil || string(ev.Data()) != "hello" || ev.DataContentType() != "text/plain" {
		t.Fatalf("text/plain event: %v, %q, %q", err, ev.Data(), ev.DataContentType())
	}
}

func TestDecodeErrorIsPermanent(t *testing.T) {
	ev, err := events.New("id", events.TypeStepRequested, events.Meta{Tenant: "acme"}, map[string]any{"step": "not a number"})
	if err != nil {
		t.Fatal(err)
	}
	var sr stepMsg
	err = events.Decode(ev, &sr)
	if !events.IsPermanent(err) || !errors.Is(err, events.ErrDecode) {
		t.Fatalf("Decode: %v, want permanent ErrDecode", err)
	}
}

func TestChildInheritsContext(t *testing.T) {
	parent, err := events.New("parent-1", events.TypeStepRequested, fullMeta, 1)
	if err != nil {
		t.Fatal(err)
	}
	c1, err := events.Child(parent, "result", events.TypeStepFinished, 2)
	if err != nil {
		t.Fatal(err)
	}
	c1again, _ := events.Child(parent, "result", events.TypeStepFinished, 2)
	c2, _ := events.Child(parent, 2, events.TypeStepFinished, 2)
	if c1.ID() != events.DeriveID("parent-1", "result") || c1.ID() != c1again.ID() {
		t.Fatalf("child id %q not derived deterministically", c1.ID())
	}
	if c1.ID() == c2.ID() {
		t.Fatal("children with different keys share an id")
	}
	if c1.Source() != parent.Source() {
		t.Fatalf("child source %q, parent %q", c1.Source(), parent.Source())
	}
	if events.MetaOf(c1) != events.MetaOf(parent) {
		t.Fatalf("child meta %+v, parent %+v", events.MetaOf(c1), events.MetaOf(parent))
	}
}

func TestSubject(t *testing.T) {
	ok := []struct{ typ, tenant, want string }{
		{events.TypeRunRequested, "acme", "agent.run.requested.acme"},
		{events.TypeRunFinished, "acme", "agent.run.finished.acme"},
		{events.TypePlanRequested, "t_1", "agent.plan.requested.t_1"},
		{events.TypePlanProposed, "T-2", "agent.plan.proposed.T-2"},
		{events.TypeStepRequested, "acme", "agent.step.requested.acme"},
		{events.TypeStepIterated, "acme", "agent.step.iterated.acme"},
		{events.TypeStepFinished, "acme", "agent.step.finished.acme"},
		{events.TypeGroupJoined, "acme", "agent.group.joined.acme"},
		{events.TypeDeadLettered, "acme", "agent.dead.acme"},
		{events.AuditType("skill.called"), "acme", "agent.trail.recorded.acme"},
		{events.AuditType("plan"), "acme", "agent.trail.recorded.acme"},
		{events.TypeStepRequested, strings.Repeat("a", 64), "agent.step.requested." + strings.Repeat("a", 64)},
	}
	for _, c := range ok {
		got, err := events.Subject(c.typ, c.tenant)
		if err != nil || got != c.want {
			t.Errorf("Subject(%q, %q) = %q, %v; want %q", c.typ, c.tenant, got, err, c.want)
		}
	}
	for _, tenant := range []string{"a.b", "*", ">", "", strings.Repeat("a", 65), "a b", "a*", "ténant"} {
		if _, err := events.Subject(events.TypeStepRequested, tenant); !errors.Is(err, events.ErrInvalidToken) {
			t.Errorf("Subject with tenant %q: %v, want ErrInvalidToken", tenant, err)
		}
		if _, err := events.Subject(events.TypeDeadLettered, tenant); !errors.Is(err, events.ErrInvalidToken) {
			t.Errorf("dead-letter Subject with tenant %q: %v, want ErrInvalidToken", tenant, err)
		}
		if _, err := events.Subject(events.AuditType("x.y"), tenant); !errors.Is(err, events.ErrInvalidToken) {
			t.Errorf("audit Subject with tenant %q: %v, want ErrInvalidToken", tenant, err)
		}
		if events.ValidToken(tenant) {
			t.Errorf("ValidToken(%q) = true", tenant)
		}
	}
	for _, typ := range []string{"com.example.run.requested", "io.agentbus.run", "io.agentbus.step.requested.extra", ""} {
		if _, err := events.Subject(typ, "acme"); !errors.Is(err, events.ErrUnknownType) {
			t.Errorf("Subject(%q): %v, want ErrUnknownType", typ, err)
		}
	}
	if events.AuditName(events.AuditType("skill.called")) != "skill.called" {
		t.Error("AuditName does not invert AuditType")
	}
	if events.DeadSubject("a.b") != "agent.dead.unknown" {
		t.Errorf("DeadSubject of invalid tenant = %q", events.DeadSubject("a.b"))
	}
	if events.ReplySubject("acme", "s1") != "reply.acme.s1" {
		t.Errorf("ReplySubject = %q", events.ReplySubject("acme", "s1"))
	}
}

func TestTenantOfSubject(t *testing.T) {
	cases := map[string]string{
		"agent.step.requested.acme": "acme",
		"agent.run.finished.t_1":    "t_1",
		"agent.dead.acme":           "acme",
		"agent.trail.recorded.acme": "acme",
		"audit.acme.skill.called":   "unknown",
		"reply.acme.s1":             "unknown",
		"agent.step":                "unknown",
		"audit.acme":                "unknown",
		"agent.step.requested.a*":   "unknown",
		"":                          "unknown",
	}
	for subj, want := range cases {
		if got := events.TenantOfSubject(subj); got != want {
			t.Errorf("TenantOfSubject(%q) = %q, want %q", subj, got, want)
		}
	}
	// Every subject Subject makes yields its tenant back.
	for _, typ := range []string{events.TypeStepRequested, events.TypeDeadLettered, events.AuditType("skill.called")} {
		s, err := events.Subject(typ, "tenant-x")
		if err != nil {
			t.Fatal(err)
		}
		if got := events.TenantOfSubject(s); got != "tenant-x" {
			t.Errorf("TenantOfSubject(%q) = %q", s, got)
		}
	}
}

func TestDeriveID(t *testing.T) {
	a := events.DeriveID("input-1", "out")
	if a != events.DeriveID("input-1", "out") {
		t.Fatal("DeriveID is not deterministic")
	}
	if _, err := uuid.Parse(a); err != nil {
		t.Fatalf("DeriveID %q is not a UUID: %v", a, err)
	}
	if u := uuid.MustParse(a); u.Version() != 5 {
		t.Fatalf("DeriveID is UUID version %d, want 5", u.Version())
	}
	seen := map[string]string{}
	for _, c := range []struct {
		in  string
		key any
	}{
		{"input-1", "out"}, {"input-1", "out2"}, {"input-2", "out"}, {"input-1", 1}, {"input-1", 2}, {"input-10", ""}, {"input-1", "0"},
	} {
		id := events.DeriveID(c.in, c.key)
		if prev, dup := seen[id]; dup {
			t.Fatalf("DeriveID(%q, %v) collides with %s", c.in, c.key, prev)
		}
		seen[id] = c.in
	}
}

func TestDeadLetterEvent(t *testing.T) {
	headers := map[string][]string{"ce-runid": {"run-5"}, "ce-id": {"orig"}}
	ev := events.DeadLetterEvent("executor", "AGENT", 17, 3, "agent.step.requested.acme", headers, []byte("raw"), "boom", false)
	if ev.Type() != events.TypeDeadLettered || ev.Source() != "agentbus/executor" {
		t.Fatalf("type %q source %q", ev.Type(), ev.Source())
	}
	if ev.ID() != events.DeadLetterEvent("router", "AGENT", 17, 1, "agent.step.requested.acme", nil, nil, "other", false).ID() {
		t.Fatal("dead letter id depends on more than stream and sequence")
	}
	if ev.ID() == events.DeadLetterEvent("executor", "AGENT", 18, 3, "agent.step.requested.acme", headers, []byte("raw"), "boom", false).ID() {
		t.Fatal("dead letters of different sequences share an id")
	}
	m, err := events.ToMsg(ev)
	if err != nil {
		t.Fatal(err)
	}
	if m.Subject != "agent.dead.acme" {
		t.Fatalf("subject %q", m.Subject)
	}
	if events.MetaOf(ev).Run != "run-5" {
		t.Fatalf("meta %+v", events.MetaOf(ev))
	}
	var dl events.DeadLetter
	if err := events.Decode(ev, &dl); err != nil {
		t.Fatal(err)
	}
	want := events.DeadLetter{Reason: "boom", Subject: "agent.step.requested.acme", Stream: "AGENT", StreamSeq: 17, Deliveries: 3, RunID: "run-5", Headers: headers, Original: []byte("raw")}
	if !reflect.DeepEqual(dl, want) {
		t.Fatalf("dead letter %+v, want %+v", dl, want)
	}

	// Headers of a foreign publisher may use any case; FromMsg accepts them,
	// so the dead letter must find the run id too.
	mixed := events.DeadLetterEvent("executor", "AGENT", 1, 1, "agent.step.requested.acme", map[string][]string{"Ce-RunId": {"run-6"}}, nil, "x", false)
	var mdl events.DeadLetter
	if err := events.Decode(mixed, &mdl); err != nil || mdl.RunID != "run-6" || events.MetaOf(mixed).Run != "run-6" {
		t.Fatalf("mixed-case run id header: RunID %q, meta %+v, %v", mdl.RunID, events.MetaOf(mixed), err)
	}

	// An unroutable subject still yields a publishable dead letter.
	odd := events.DeadLetterEvent("executor", "AGENT", 2, 1, "weird", nil, nil, "x", false)
	if m, err := events.ToMsg(odd); err != nil || m.Subject != "agent.dead.unknown" {
		t.Fatalf("dead letter of subject weird: %v %v", m, err)
	}
}

func TestErrors(t *testing.T) {
	if events.Permanent(nil) != nil {
		t.Fatal("Permanent(nil) != nil")
	}
	base := errors.New("base")
	p := events.Permanent(base)
	if !events.IsPermanent(p) || !errors.Is(p, base) || p.Error() != "base" {
		t.Fatalf("Permanent: %v", p)
	}
	wrapped := errors.Join(errors.New("ctx"), p)
	if !events.IsPermanent(wrapped) {
		t.Fatal("IsPermanent does not see through wrapping")
	}
	if events.IsPermanent(base) || events.IsPermanent(nil) {
		t.Fatal("IsPermanent of a plain error")
	}
}

// TestAuditAppendJSONIsItsEncoding: an audit event's data built around
// its payload decodes to the same lineage and payload as json.Marshal's
// encoding of it, and ChildJSON carries it as Child carries data.
func TestAuditAppendJSONIsItsEncoding(t *testing.T) {
	for _, a := range []events.Audit{
		{},
		{PlanID: "plan-1"},
		{Payload: json.RawMessage(`{"n":1}`)},
		{PlanID: "plan-1", TaskID: "task-\"q\"", UserID: "u <&> é \u2028", SkillID: "s\\1", ScriptHash: "h\n", Payload: json.RawMessage(`[1,{"a":"b"}]`)},
	} {
		got := a.AppendJSON(nil)
		want, err := json.Marshal(a)
		if err != nil {
			t.Fatal(err)
		}
		var g, w events.Audit
		if err := json.Unmarshal(got, &g); err != nil {
			t.Fatalf("%+v: %s does not decode: %v", a, got, err)
		}
		if err := json.Unmarshal(want, &w); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(g, w) {
			t.Errorf("%s decodes as %+v, json.Marshal's %s as %+v", got, g, want, w)
		}
		parent, err := events.New("in-1", events.TypeStepRequested, fullMeta, map[string]int{})
		if err != nil {
			t.Fatal(err)
		}
		viaJSON := events.ChildJSON(parent, "k", events.AuditType("x.y"), got)
		viaData, err := events.Child(parent, "k", events.AuditType("x.y"), a)
		if err != nil {
			t.Fatal(err)
		}
		if viaJSON.ID() != viaData.ID() || events.MetaOf(viaJSON) != events.MetaOf(viaData) || viaJSON.Source() != viaData.Source() ||
			viaJSON.DataContentType() != viaData.DataContentType() || string(viaJSON.Data()) != string(got) {
			t.Errorf("ChildJSON %v, Child %v", viaJSON, viaData)
		}
	}
}
