package events

import (
	"errors"
	"math"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/go-json-experiment/json/jsontext"
	json "github.com/go-json-experiment/json/v1"
)

// DeadLetter is the data of a dead-lettered message: why it was removed and
// the original bytes, so nothing disappears.
type DeadLetter struct {
	Reason     string `json:"reason"`
	Subject    string `json:"subject"`
	Stream     string `json:"stream,omitempty"`
	StreamSeq  uint64 `json:"stream_seq,omitempty"`
	Deliveries uint64 `json:"deliveries,omitempty"`
	// Exhausted: the message ran out of deliveries on transient errors
	// (it was not invalid).
	Exhausted bool                `json:"exhausted,omitempty"`
	RunID     string              `json:"run_id,omitempty"`
	Headers   map[string][]string `json:"headers,omitempty"`
	Original  []byte              `json:"original"`
	// Trail: the message's audit trail could not be indexed; the message
	// itself was its role's to handle, so no run ends for it.
	Trail bool `json:"trail,omitempty"`
}

// Audit is the data of an audit event (Layer 1–3 monitoring): the lineage
// fields plus a free-form payload.
type Audit struct {
	PlanID     string          `json:"plan_id,omitempty"`
	TaskID     string          `json:"task_id,omitempty"`
	UserID     string          `json:"user_id,omitempty"`
	SkillID    string          `json:"skill_id,omitempty"`
	ScriptHash string          `json:"script_hash,omitempty"`
	Payload    json.RawMessage `json:"payload,omitempty"`
}

// Validate checks a dead letter names its reason and subject.
func (d DeadLetter) Validate() error {
	switch {
	case d.Reason == "":
		return errors.New("reason: is required")
	case d.Subject == "":
		return errors.New("subject: is required")
	}
	return nil
}

// AppendJSON appends the JSON of a, as json.Marshal encodes it, to dst.
// The payload, JSON already (json.Marshal's output), is appended as it is
// rather than checked and copied again.
func (a Audit) AppendJSON(dst []byte) []byte {
	dst = append(dst, '{')
	for _, f := range [...]struct{ name, value string }{{"plan_id", a.PlanID}, {"task_id", a.TaskID}, {"user_id", a.UserID},
		{"skill_id", a.SkillID}, {"script_hash", a.ScriptHash}} {
		if f.value == "" {
			continue
		}
		if len(dst) > 1 {
			dst = append(dst, ',')
		}
		dst = append(append(append(dst, '"'), f.name...), '"', ':')
		dst, _ = jsontext.AppendQuote(dst, f.value)
	}
	if len(a.Payload) > 0 {
		if len(dst) > 1 {
			dst = append(dst, ',')
		}
		dst = append(append(dst, `"payload":`...), a.Payload...)
	}
	return append(dst, '}')
}

// MarshalPayload encodes an audit event's payload exactly as json.Marshal
// does. Most payloads are small maps of strings, numbers, flags and
// nested maps: those are encoded here, names sorted as json.Marshal sorts
// them, without its reflection and its type lookup for every value held
// in an interface (about half of building a hop's audit events). A value
// of any other type is encoded by json.Marshal; a string json.Marshal
// would escape for HTML or JavaScript, invalid UTF-8 or a non-ASCII name
// sends the whole payload to it.
func MarshalPayload(v any) ([]byte, error) {
	if m, ok := v.(map[string]any); ok {
		if b, ok := appendPayloadMap(make([]byte, 0, 256), m); ok {
			return b, nil
		}
	}
	return json.Marshal(v)
}

// appendPayloadMap appends m as json.Marshal encodes it, or reports that
// it cannot (false).
func appendPayloadMap(dst []byte, m map[string]any) ([]byte, bool) {
	if m == nil {
		return append(dst, "null"...), true
	}
	var buf [16]string
	keys := buf[:0]
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys) // byte order: json.Marshal's for the ASCII names appendPlainString allows
	dst = append(dst, '{')
	for i, k := range keys {
		if i > 0 {
			dst = append(dst, ',')
		}
		var ok bool
		if dst, ok = appendPlainString(dst, k, true); !ok {
			return dst, false
		}
		dst = append(dst, ':')
		if dst, ok = appendPayloadValue(dst, m[k]); !ok {
			return dst, false
		}
	}
	return append(dst, '}'), true
}

// appendPayloadValue appends v as json.Marshal encodes it, or reports
// that it cannot.
func appendPayloadValue(dst []byte, v any) ([]byte, bool) {
	switch x := v.(type) {
	case nil:
		return append(dst, "null"...), true
	case string:
		return appendPlainString(dst, x, false)
	case bool:
		return strconv.AppendBool(dst, x), true
	case int:
		return strconv.AppendInt(dst, int64(x), 10), true
	case int64:
		return strconv.AppendInt(dst, x, 10), true
	case int32:
		return strconv.AppendInt(dst, int64(x), 10), true
	case uint64:
		return strconv.AppendUint(dst, x, 10), true
	case float64:
		return appendFloat(dst, x)
	case map[string]any:
		return appendPayloadMap(dst, x)
	case []string:
		if x == nil {
			return append(dst, "null"...), true
		}
		dst = append(dst, '[')
		for i, s := range x {
			if i > 0 {
				dst = append(dst, ',')
			}
			var ok bool
			if dst, ok = appendPlainString(dst, s, false); !ok {
				return dst, false
			}
		}
		return append(dst, ']'), true
	}
	b, err := json.Marshal(v)
	if err != nil {
		return dst, false
	}
	return append(dst, b...), true
}

// appendPlainString appends s quoted, when json.Marshal would quote it
// the same way: valid UTF-8 with none of the characters it escapes for
// HTML or JavaScript (<, >, &, U+2028, U+2029). A name must be ASCII as
// well: json.Marshal sorts names by bytes only while they are.
func appendPlainString(dst []byte, s string, name bool) ([]byte, bool) {
	ascii := true
	for i := range len(s) {
		switch c := s[i]; {
		case c == '<' || c == '>' || c == '&':
			return dst, false
		case c >= utf8.RuneSelf:
			ascii = false
		}
	}
	if !ascii && (name || !utf8.ValidString(s) || strings.ContainsAny(s, "\u2028\u2029")) {
		return dst, false
	}
	b, err := jsontext.AppendQuote(dst, s)
	return b, err == nil
}

// appendFloat appends f as json.Marshal encodes a float64: the shortest
// decimal that reads back as f, in exponent form below 1e-6 and from
// 1e21, with a one-digit negative exponent unpadded (1e-7, not 1e-07).
// NaN and the infinities, which json.Marshal refuses, are refused.
func appendFloat(dst []byte, f float64) ([]byte, bool) {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return dst, false
	}
	format := byte('f')
	if abs := math.Abs(f); abs != 0 && (abs < 1e-6 || abs >= 1e21) {
		format = 'e'
	}
	dst = strconv.AppendFloat(dst, f, format, -1, 64)
	if n := len(dst); format == 'e' && n >= 4 && dst[n-4] == 'e' && dst[n-3] == '-' && dst[n-2] == '0' {
		dst[n-2] = dst[n-1]
		dst = dst[:n-1]
	}
	return dst, true
}
