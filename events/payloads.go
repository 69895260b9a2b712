package events

import (
	"errors"

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
