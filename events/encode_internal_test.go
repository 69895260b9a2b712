package events

import (
	"bytes"
	"fmt"
	"math"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/cloudevents/sdk-go/v2/event"
	json "github.com/go-json-experiment/json/v1"
	"github.com/google/uuid"
)

// TestDeriveIDIsItsFormat: the ids DeriveID derives without fmt are the
// UUIDv5 of "<input id>/<key as %v writes it>", for every kind of key.
func TestDeriveIDIsItsFormat(t *testing.T) {
	for _, key := range []any{"out", "", "audit/step_1.started/2", 0, 7, -3, int64(9), uint8(2), 1.5, true, struct{ A int }{1}} {
		want := uuid.NewSHA1(idNamespace, fmt.Appendf(nil, "%s/%v", "in-1", key)).String()
		if got := DeriveID("in-1", key); got != want {
			t.Errorf("DeriveID(in-1, %#v) = %s, want %s", key, got, want)
		}
	}
}

// settersEvent is newEvent as the SDK's setters build it.
func settersEvent(id, typ string, meta Meta) event.Event {
	ev := event.New()
	ev.SetID(id)
	ev.SetType(typ)
	src := meta.SourceProcess
	if src == "" {
		src = "agentbus"
	}
	ev.SetSource(sourcePrefix + src)
	ev.SetTime(time.Now().UTC())
	setMeta(&ev, meta)
	return ev
}

// TestNewEventIsTheSettersEvent: the context newEvent builds directly is
// the one the SDK's setters build: the same attributes, extensions and
// verdict of validation, and children that inherit the same source.
func TestNewEventIsTheSettersEvent(t *testing.T) {
	metas := []Meta{
		{},
		{Tenant: "acme", SourceProcess: "router"},
		{Tenant: "acme", Session: "s-1", Run: "r-1", Task: "t-1", Correlation: "c-1", TraceParent: "00-abc-def-01", SourceProcess: "executor"},
		{Tenant: "acme", SourceProcess: "ingress-2.b_c~d"},
		{Tenant: "acme", SourceProcess: "with space"},
		{Tenant: "acme", SourceProcess: "a:b"},
		{Tenant: "acme", SourceProcess: "percent%41"},
	}
	for _, m := range metas {
		for _, id := range []string{"id-1", " id-2 ", ""} {
			got, want := newEvent(id, " "+TypeStepRequested, m), settersEvent(id, " "+TypeStepRequested, m)
			if got.ID() != want.ID() || got.Type() != want.Type() || got.Source() != want.Source() || got.SpecVersion() != want.SpecVersion() {
				t.Errorf("%+v %q: newEvent %s %s %s %s, the setters %s %s %s %s", m, id, got.ID(), got.Type(), got.Source(), got.SpecVersion(),
					want.ID(), want.Type(), want.Source(), want.SpecVersion())
			}
			if !reflect.DeepEqual(got.Extensions(), want.Extensions()) {
				t.Errorf("%+v: extensions %v, want %v", m, got.Extensions(), want.Extensions())
			}
			if d := got.Time().Sub(want.Time()); d < -time.Second || d > time.Second {
				t.Errorf("%+v: time %v, the setters' %v", m, got.Time(), want.Time())
			}
			if g, w := validate(got) == nil, want.Validate() == nil; g != w {
				t.Errorf("%+v %q: valid %v, the setters' event %v", m, id, g, w)
			}
			if got.ID() != "" && sourceOf(got) != got.Source() {
				t.Errorf("%+v: sourceOf %q, Source %q", m, sourceOf(got), got.Source())
			}
		}
	}
}

// TestSourceOfIsSource: sourceOf reads a source as Source writes it,
// whatever URI reference an event arrived with.
func TestSourceOfIsSource(t *testing.T) {
	for _, src := range []string{"agentbus/router", "agentbus/ingress-2", "/abs/path", "//looks-like-a-host", "a:b",
		"https://example.com/x?y#z", "urn:agentbus:x", "with%20escape", "dot/./seg", "ümlaut"} {
		ev := event.New()
		ev.SetID("id")
		if err := ev.Context.SetSource(src); err != nil {
			continue // not a URI reference: no event carries it
		}
		if got, want := sourceOf(ev), ev.Source(); got != want {
			t.Errorf("sourceOf(%q) = %q, Source %q", src, got, want)
		}
	}
}

// TestAppendEventIsWriteJson: a trail's events are appended as
// event.WriteJson writes them: byte for byte for the strings agentbus
// writes, and for any other string the same event once decoded; an event
// of another shape is left to WriteJson.
func TestAppendEventIsWriteJson(t *testing.T) {
	parent, err := New("in-1", TypeStepRequested, Meta{Tenant: "acme", Session: "s-1", Run: "r-1", SourceProcess: "executor"}, map[string]int{"n": 1})
	if err != nil {
		t.Fatal(err)
	}
	audit := func(payload string) event.Event {
		ev := ChildJSON(parent, "audit/x", AuditType("step_1.started"), Audit{PlanID: "p-1", Payload: []byte(payload)}.AppendJSON(nil))
		SetExt(&ev, ExtTask, "t-1")
		return ev
	}
	write := func(ev event.Event) []byte {
		var b bytes.Buffer
		if err := event.WriteJson(&ev, &b); err != nil {
			t.Fatal(err)
		}
		return b.Bytes()
	}
	exact := []event.Event{
		audit(`{"a":1}`),
		audit(`{"text":"héllo, 世界 <b>&amp;</b>","n":[1,2.5,null]}`),
		ChildJSON(parent, "out", TypeStepIterated, []byte(`{"run":{"seq":3}}`)),
		newEvent("no-data", TypeRunFinished, Meta{Tenant: "acme", SourceProcess: "router"}),
		newEvent("no-ext", TypeRunFinished, Meta{}),
	}
	withTrace := audit(`{}`)
	withTrace.SetExtension(ExtTraceParent, "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01")
	exact = append(exact, withTrace)
	for i, ev := range exact {
		got, ok := appendEvent(nil, &ev)
		if !ok {
			t.Fatalf("event %d was not appended", i)
		}
		if want := write(ev); !bytes.Equal(got, want) {
			t.Errorf("event %d:\n got %s\nwant %s", i, got, want)
		}
	}
	// Strings WriteJson escapes its own way: the same events once read.
	odd := audit(`{}`)
	odd.SetExtension(ExtCorrelation, "line\nbreak\b\f\u0001 \"quoted\" \\ \u2028")
	got, ok := appendEvent(nil, &odd)
	if !ok {
		t.Fatal("an extension with escapes was not appended")
	}
	a, errA := unpackBatch(append(append([]byte{'['}, got...), ']'))
	b, errB := unpackBatch(append(append([]byte{'['}, write(odd)...), ']'))
	if errA != nil || errB != nil || !reflect.DeepEqual(a[0].Extensions(), b[0].Extensions()) || a[0].ID() != b[0].ID() {
		t.Errorf("escaped extension: %v / %v, %v / %v", errA, errB, a, b)
	}
	// A name no setter takes is still written as valid JSON, as WriteJson writes it.
	weird := audit(`{}`)
	weird.Context.(*event.EventContextV1).Extensions["we\"ird"] = "x"
	if got, ok := appendEvent(nil, &weird); !ok || !bytes.Equal(got, write(weird)) || !json.Valid(got) {
		t.Errorf("an extension named with a quote: %s, want %s", got, write(weird))
	}
	// Other shapes are WriteJson's.
	others := map[string]func(ev *event.Event){
		"invalid UTF-8": func(ev *event.Event) { ev.SetExtension(ExtCorrelation, "bad \xff") },
		"an int extension": func(ev *event.Event) {
			ev.Context.(*event.EventContextV1).Extensions["count"] = 3
		},
		"a subject":      func(ev *event.Event) { ev.SetSubject("s") },
		"base64 data":    func(ev *event.Event) { ev.DataBase64 = true },
		"text data":      func(ev *event.Event) { ev.SetDataContentType("text/plain") },
		"a data schema":  func(ev *event.Event) { ev.SetDataSchema("http://example.com/s") },
		"a v0.3 context": func(ev *event.Event) { ev.Context = ev.Context.AsV03() },
	}
	for name, change := range others {
		ev := audit(`{"a":1}`)
		change(&ev)
		if _, ok := appendEvent(nil, &ev); ok {
			t.Errorf("%s: appended, want it left to WriteJson", name)
		}
		var buf bytes.Buffer
		if data, _, err := encodeTrail(&buf, []event.Event{ev}); err == nil && !bytes.Equal(data, append(append([]byte{'['}, write(ev)...), ']')) {
			t.Errorf("%s: the trail is not WriteJson's: %s", name, data)
		}
	}
	if strings.Contains(string(write(exact[0])), "\n") {
		t.Fatal("WriteJson wrote a line break")
	}
}

// TestMarshalPayloadIsJSONMarshal: every payload MarshalPayload encodes
// itself comes out byte for byte as json.Marshal encodes it, whatever
// its names, strings (escapes, HTML characters, invalid UTF-8, line
// separators), numbers, nesting and values of other types.
func TestMarshalPayloadIsJSONMarshal(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 34))
	pieces := []string{"a", "z", "Id", "_", "0", " ", "\"", "\\", "\n", "\t", "\x01", "\x7f", "<", ">", "&", "é", "日本",
		"\u2028", "\u2029", "\xff", "\xc3", "😀", "step_1", "memory_key"}
	str := func() string {
		var b strings.Builder
		for range r.IntN(5) {
			b.WriteString(pieces[r.IntN(len(pieces))])
		}
		return b.String()
	}
	var value func(depth int) any
	value = func(depth int) any {
		switch r.IntN(13) {
		case 0:
			return nil
		case 1, 2:
			return str()
		case 3:
			return r.IntN(2) == 0
		case 4:
			return r.IntN(2000) - 1000
		case 5:
			return int64(r.Uint64())
		case 6:
			switch r.IntN(8) {
			case 0:
				return float64(r.IntN(100))
			case 1:
				return -r.Float64() * 1e-7
			case 2:
				return math.Inf(1)
			case 3:
				return 1e21
			}
			return r.Float64() * math.Pow(10, float64(r.IntN(50)-25))
		case 7:
			if depth > 2 {
				return "leaf"
			}
			m := map[string]any{}
			for range r.IntN(5) {
				m[str()] = value(depth + 1)
			}
			return m
		case 8:
			if r.IntN(4) == 0 {
				return []string(nil)
			}
			s := make([]string, r.IntN(3))
			for i := range s {
				s[i] = str()
			}
			return s
		case 9:
			return json.RawMessage(`{"b": 1, "a" : [ true ]}`)
		case 10:
			return map[string]float64{"tokens": 3, "usd": 0.25}
		case 11:
			return struct {
				A string `json:"a"`
				B int    `json:"b,omitempty"`
			}{A: str()}
		}
		return uint64(r.Uint64())
	}
	fast := 0
	for i := range 20000 {
		p := map[string]any{}
		for range r.IntN(7) {
			p[str()] = value(0)
		}
		if i%50 == 0 {
			p = nil
		}
		want, wantErr := json.Marshal(p)
		got, err := MarshalPayload(p)
		if !bytes.Equal(got, want) || (err == nil) != (wantErr == nil) {
			t.Fatalf("payload %#v:\n got %s (%v)\nwant %s (%v)", p, got, err, want, wantErr)
		}
		if _, ok := appendPayloadMap(nil, p); ok {
			fast++
		}
	}
	if fast < 2000 {
		t.Fatalf("only %d of 20000 payloads took the fast path", fast)
	}
	for _, v := range []any{"text", 3, []int{1}, struct{ A int }{1}, map[string]int{"a": 1}} {
		want, _ := json.Marshal(v)
		if got, err := MarshalPayload(v); err != nil || !bytes.Equal(got, want) {
			t.Errorf("%#v: got %s (%v), want %s", v, got, err, want)
		}
	}
}
