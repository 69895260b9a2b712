package store

import (
	"errors"
	"fmt"
	"math"
	"time"

	json "github.com/go-json-experiment/json/v1"
)

// encodable reports what json.Marshal would refuse in doc, one of the
// types typedIndex names, without encoding it: a NaN or an infinity, a
// json.RawMessage that is not JSON, a time outside RFC 3339 (a year
// outside 0–9999, a zone offset of a day or more). Everything else in
// these types encodes. TestValidateMatchesEncode holds it to json.Marshal.
func encodable(doc any) error {
	var e encodeCheck
	switch d := doc.(type) {
	case Memory:
		for _, f := range d.Embedding {
			e.number(float64(f))
		}
		e.times(d.LockExpires, d.CreatedAt, d.TTLAt)
	case Plan:
		e.times(d.CreatedAt, d.CompletedAt)
		for _, s := range d.Steps {
			e.raw(s.ReturnSpec)
			e.times(s.StartedAt, s.FinishedAt)
		}
		for _, r := range d.ReplanHistory {
			e.times(r.RevisedAt)
		}
		e.number(d.Usage.CostUSD)
	case Event:
		e.raw(d.Payload)
		e.times(d.TS)
		e.number(d.CostUSD)
	case Soul:
		e.raw(d.Policies)
		e.times(d.UpdatedAt)
	case Session:
		e.times(d.StartedAt, d.LastActive, d.EndedAt)
		for _, m := range d.Messages {
			e.times(m.TS)
		}
		if h := d.Handoff; h != nil {
			e.raw(h.Context)
			e.times(h.At)
		}
	}
	return e.err
}

// encodeCheck keeps the first value json.Marshal would refuse.
type encodeCheck struct{ err error }

func (e *encodeCheck) number(f float64) {
	if e.err == nil && (math.IsNaN(f) || math.IsInf(f, 0)) {
		e.err = fmt.Errorf("unsupported value: %v", f)
	}
}

// raw checks a json.RawMessage with omitempty: empty is omitted.
func (e *encodeCheck) raw(r json.RawMessage) {
	if e.err == nil && len(r) > 0 && !json.Valid(r) {
		e.err = errors.New("a raw value is not valid JSON")
	}
}

func (e *encodeCheck) times(ts ...time.Time) {
	for _, t := range ts {
		if e.err != nil {
			return
		}
		if y := t.Year(); y < 0 || y > 9999 {
			e.err = fmt.Errorf("time %v: year outside of range [0,9999]", t)
			continue
		}
		if _, off := t.Zone(); off <= -24*3600 || off >= 24*3600 {
			e.err = fmt.Errorf("time %v: zone offset outside of range", t)
		}
	}
}
