package events_test

import (
	"bytes"
	"errors"
	"testing"

	"github.com/cloudevents/sdk-go/v2/event"
	"github.com/nats-io/nats.go"

	"github.com/agentbus/agentbus/events"
)

// The decoders of what arrives on NATS take input from any publisher the
// account allows. Whatever the bytes, they must answer with an event or a
// permanent ErrDecode (dead-lettered on its first delivery), never panic,
// and what they accept must survive encoding again. `make fuzz` runs these
// for a set time; `go test` runs their seeds.

// fuzzSeed is a well-formed event of the run's vocabulary, as a message.
func fuzzSeed(f *testing.F) *nats.Msg {
	f.Helper()
	ev, err := events.New("run-1", events.TypeRunRequested, events.Meta{Tenant: "acme", Session: "s1", Task: "t1"},
		map[string]any{"task": "List the active outlets", "budget": map[string]any{"model_calls": 8}})
	if err != nil {
		f.Fatal(err)
	}
	m, err := events.ToMsg(ev)
	if err != nil {
		f.Fatal(err)
	}
	return m
}

// checkDecoded holds for every event a decoder accepted: it validates, and
// encoding it again and decoding that gives the same event.
func checkDecoded(t *testing.T, ev event.Event) {
	t.Helper()
	if err := ev.Validate(); err != nil {
		t.Fatalf("accepted an invalid event: %v", err)
	}
	m, err := events.ToMsg(ev)
	if err != nil {
		return // an event that names no routable subject cannot be sent; decoding it was still sound
	}
	again, err := events.FromMsg(m.Header, m.Data)
	if err != nil {
		t.Fatalf("re-decoding an accepted event: %v", err)
	}
	if again.ID() != ev.ID() || again.Type() != ev.Type() || !bytes.Equal(again.Data(), ev.Data()) {
		t.Fatalf("round trip changed the event: %s %s %q -> %s %s %q", ev.ID(), ev.Type(), ev.Data(), again.ID(), again.Type(), again.Data())
	}
}

// checkRefusal holds for every refusal: a permanent ErrDecode.
func checkRefusal(t *testing.T, err error) {
	t.Helper()
	if !errors.Is(err, events.ErrDecode) || !events.IsPermanent(err) {
		t.Fatalf("refusal is not a permanent decode error: %v", err)
	}
}

func FuzzFromMsg(f *testing.F) {
	m := fuzzSeed(f)
	f.Add(m.Header.Get("Ce-Specversion"), m.Header.Get("Ce-Id"), m.Header.Get("Ce-Type"), m.Header.Get("Ce-Source"),
		m.Header.Get("Ce-Time"), m.Header.Get("Ce-Tenant"), m.Header.Get("Content-Type"), m.Data)
	f.Add("1.0", "x", events.TypeRunRequested, "/", "not a time", "acme", "", []byte(`{}`))
	f.Add("1.0", "", "", "", "", "", "text/plain", []byte("\xff"))
	f.Add("0.3", "x", "t", "s", "", "", "", []byte(`[`))
	f.Fuzz(func(t *testing.T, spec, id, typ, source, ts, tenant, ct string, data []byte) {
		h := nats.Header{}
		for k, v := range map[string]string{"Ce-Specversion": spec, "Ce-Id": id, "Ce-Type": typ, "Ce-Source": source,
			"Ce-Time": ts, "Ce-Tenant": tenant, "Content-Type": ct} {
			if v != "" {
				h.Set(k, v)
			}
		}
		ev, err := events.FromMsg(h, data)
		if err != nil {
			checkRefusal(t, err)
			return
		}
		checkDecoded(t, ev)
	})
}

func FuzzBatch(f *testing.F) {
	m := fuzzSeed(f)
	ev, err := events.FromMsg(m.Header, m.Data)
	if err != nil {
		f.Fatal(err)
	}
	one, err := ev.MarshalJSON()
	if err != nil {
		f.Fatal(err)
	}
	f.Add([]byte("[" + string(one) + "]"))
	f.Add([]byte("[" + string(one) + "," + string(one) + "]"))
	f.Add([]byte(`[]`))
	f.Add([]byte(`[{"specversion":"1.0","id":"a","type":"t","source":"/","data":"x"}]`))
	f.Add([]byte(`[{"specversion":"1.0","id":"a","type":"t","source":"/","data_base64":"////"}]`))
	f.Add([]byte(`{"specversion":"1.0"}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		h := nats.Header{}
		h.Set("Content-Type", events.ContentTypeBatch)
		evs, err := events.FromMsgs(h, data)
		if err != nil {
			checkRefusal(t, err)
			return
		}
		if len(evs) == 0 {
			t.Fatal("an accepted batch with no events")
		}
		for _, ev := range evs {
			if err := ev.Validate(); err != nil {
				t.Fatalf("accepted an invalid event: %v", err)
			}
		}
		// The same bytes as a trail header decode to the same events.
		th := nats.Header{}
		th.Set(events.HeaderTrail, string(data))
		trail, err := events.Trail(th, "agent.run.requested.acme", nil) // not a trail subject: the header is read
		if err != nil || len(trail) != len(evs) {
			t.Fatalf("as a trail: %d events, %v; as a batch %d", len(trail), err, len(evs))
		}
	})
}

// FuzzDecode: the data of an event decoded strictly into a type with a
// validator and a tenant, the path every handler's input takes.
func FuzzDecode(f *testing.F) {
	f.Add([]byte(`{"tenant_id":"acme","reason":"stop"}`), "acme")
	f.Add([]byte(`{"tenant_id":"acme","reason":"stop","extra":1}`), "acme")
	f.Add([]byte(`{"tenant_id":"other","reason":"stop"}`), "acme")
	f.Add([]byte(`{"tenant_id":"acme"} {}`), "acme")
	f.Add([]byte(`{"tenant_id":"acme","reason":""}`), "acme")
	f.Fuzz(func(t *testing.T, data []byte, tenant string) {
		ev := event.New()
		ev.SetID("e1")
		ev.SetType("agent.test")
		ev.SetSource("/fuzz")
		events.SetExt(&ev, events.ExtTenant, tenant)
		ev.DataEncoded = data
		var v fuzzData
		err := events.Decode(ev, &v)
		if err != nil {
			if !events.IsPermanent(err) || !(errors.Is(err, events.ErrDecode) || errors.Is(err, events.ErrInvalidData)) {
				t.Fatalf("refusal is not a permanent decode or data error: %v", err)
			}
			return
		}
		if v.Reason == "" || v.TenantID != tenant {
			t.Fatalf("accepted %+v for tenant %q", v, tenant)
		}
	})
}

// fuzzData is a handler's input in miniature: it validates and names its
// tenant.
type fuzzData struct {
	TenantID string `json:"tenant_id"`
	Reason   string `json:"reason"`
}

func (d fuzzData) Validate() error {
	if d.Reason == "" {
		return errors.New("reason is required")
	}
	return nil
}

func (d fuzzData) Tenant() string { return d.TenantID }
