package events

import (
	"errors"
	"testing"

	"github.com/cloudevents/sdk-go/v2/event"
	"github.com/cloudevents/sdk-go/v2/types"
)

// TestValidateGivesValidatesVerdict: the checks of an event's attributes
// that skip Validate's allocations for the events agentbus builds give
// Validate's verdict on those and on every other shape.
func TestValidateGivesValidatesVerdict(t *testing.T) {
	base := func(t *testing.T) event.Event {
		ev, err := New("id-1", TypeStepRequested, Meta{Tenant: "acme", SourceProcess: "router"}, map[string]int{"n": 1})
		if err != nil {
			t.Fatal(err)
		}
		return ev
	}
	str := func(s string) *string { return &s }
	cases := map[string]func(ev *event.Event){
		"as built":              func(*event.Event) {},
		"no data":               func(ev *event.Event) { ev.Context.(*event.EventContextV1).DataContentType = nil },
		"blank id":              func(ev *event.Event) { ev.SetID(" ") },
		"no type":               func(ev *event.Event) { ev.SetType("") },
		"blank type":            func(ev *event.Event) { ev.SetType("\t") },
		"no source":             func(ev *event.Event) { ev.Context.(*event.EventContextV1).Source = types.URIRef{} },
		"blank source":          func(ev *event.Event) { ev.SetSource(" ") },
		"absolute source":       func(ev *event.Event) { ev.SetSource("https://agentbus.example/router") },
		"opaque source":         func(ev *event.Event) { ev.SetSource("urn:agentbus:router") },
		"subject":               func(ev *event.Event) { ev.SetSubject("step 1") },
		"blank subject":         func(ev *event.Event) { ev.Context.(*event.EventContextV1).Subject = str(" ") },
		"text data":             func(ev *event.Event) { ev.SetDataContentType("text/plain") },
		"bad content type":      func(ev *event.Event) { ev.Context.(*event.EventContextV1).DataContentType = str("not a/media;type=") },
		"blank content type":    func(ev *event.Event) { ev.Context.(*event.EventContextV1).DataContentType = str(" ") },
		"data schema":           func(ev *event.Event) { ev.SetDataSchema("https://agentbus.example/schema") },
		"relative data schema":  func(ev *event.Event) { ev.Context.(*event.EventContextV1).DataSchema = types.ParseURI("schema") },
		"an earlier data error": func(ev *event.Event) { ev.FieldErrors = map[string]error{"data": errors.New("cannot encode")} },
		"version 0.3":           func(ev *event.Event) { ev.SetSpecVersion(event.CloudEventsVersionV03) },
	}
	for name, mod := range cases {
		t.Run(name, func(t *testing.T) {
			ev := base(t)
			mod(&ev)
			if got, want := validate(ev) == nil, ev.Validate() == nil; got != want {
				t.Errorf("validate says valid %v, Validate %v (%v)", got, want, ev.Validate())
			}
		})
	}
}
