package events

import (
	"errors"

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
