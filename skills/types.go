package skills

import (
	"errors"
	"fmt"
	"regexp"

	json "github.com/go-json-experiment/json/v1"

	"github.com/agentbus/agentbus/fault"
)

// Summary is one candidate returned by find_relevant_skills.
type Summary struct {
	Name        string  `json:"name"`
	Description string  `json:"description"`
	Score       float64 `json:"score"`
	// Keywords are further words Rank reads for an item (its parameter
	// names, enum values and output fields); they are not sent.
	Keywords string `json:"-"`
}

// Manifest is a skill's full description returned by load_skill.
type Manifest struct {
	Name          string          `json:"name"`
	Description   string          `json:"description"`
	InputSchema   json.RawMessage `json:"input_schema"`   // JSON Schema (object)
	OutputSchema  json.RawMessage `json:"output_schema"`  // JSON Schema (object)
	ExecutionMode string          `json:"execution_mode"` // "sync"
	// Annotations are the tool's MCP behaviour hints; nil when the server
	// declares none (as an older Skill Service does). ReadOnly,
	// Destructive and OpenWorld interpret them.
	Annotations *Annotations `json:"annotations,omitempty"`
	// Mode, when a Skill Service declares it, is the skill's approval
	// mode (read_only, local_write, network, delegated, destructive);
	// ApprovalMode otherwise derives one from the annotations.
	Mode string `json:"approval_mode,omitempty"`
	// Internal marks a tool agentbus itself runs (a system tool such as
	// send_message): its result is agentbus's own words, never a remote
	// party's, so reading it taints no step even when the tool reaches
	// the open world. Only the process that builds the manifest sets it;
	// it never comes from a server.
	Internal bool `json:"-"`
}

// Annotations are a tool's MCP behaviour hints (readOnlyHint, destructiveHint, idempotentHint, openWorldHint); nil fields are unset.
type Annotations struct {
	// ReadOnlyHint, when true, says the tool does not modify its environment.
	ReadOnlyHint *bool `json:"readOnlyHint,omitempty"`
	// DestructiveHint, when true, says the tool may delete or overwrite
	// data (meaningful only when it is not read-only).
	DestructiveHint *bool `json:"destructiveHint,omitempty"`
	// IdempotentHint, when true, says repeating a call with the same
	// arguments has no further effect.
	IdempotentHint *bool `json:"idempotentHint,omitempty"`
	// OpenWorldHint, when true, says the tool reaches entities outside the
	// server (the web, other services); MCP's default is true.
	OpenWorldHint *bool `json:"openWorldHint,omitempty"`
}

// ExecutionModeSync is the only execution mode the demo service declares: the
// skill result is returned in the tools/call response.
const ExecutionModeSync = "sync"

// Names of the discovery tools a Skill Service exposes next to its skills.
const (
	// ToolFindRelevantSkills ranks the tenant's skills against a query.
	ToolFindRelevantSkills = "find_relevant_skills"
	// ToolLoadSkill returns the Manifest of one of the tenant's skills.
	ToolLoadSkill = "load_skill"
)

// Limits of find_relevant_skills.
const (
	// DefaultFindLimit is the number of candidates returned when the request
	// sets no limit.
	DefaultFindLimit = 5
	// MaxFindLimit caps the requested limit.
	MaxFindLimit = 50
)

// NotFoundMessage starts the tool error a Skill Service returns for a
// skill outside the tenant's catalog; Client maps it to ErrSkillNotFound.
const NotFoundMessage = "skill not found"

// PermissionDeniedMessage starts the tool error a Skill Service returns
// when it refuses the caller a skill; Client maps a tool error starting
// with it (or with "forbidden"), in any case, to ErrPermissionDenied.
const PermissionDeniedMessage = "permission denied"

// MetaIdempotencyKey is the _meta field of a tools/call request that carries
// the caller's idempotency key.
const MetaIdempotencyKey = "idempotency_key"

// MetaTraceParent is the _meta field of a tools/call request that carries
// the W3C trace context of the call's span.
const MetaTraceParent = "traceparent"

// Sentinel errors. Errors returned by this package wrap them with %w.
// A skill the catalog does not have, a refused caller, arguments the
// skill rejects and a configuration that cannot work are permanent
// (fault.Permanent): calling again changes nothing. A tool's own error
// (ErrSkillFailed) is its answer, for the model to read; an answer that
// does not decode, a closed client and a call that did not reach the
// skill are transient, as is every transport error.
var (
	// ErrSkillNotFound reports a skill that is not in the tenant's catalog.
	ErrSkillNotFound = fault.Permanent(errors.New("skills: skill not found"))
	// ErrSkillFailed reports a tool call that returned a tool error (IsError).
	ErrSkillFailed = errors.New("skills: skill failed")
	// ErrResultTooLarge reports a result whose text, or one of whose
	// attachments, exceeds Config.MaxResultBytes. It is an ErrSkillFailed.
	ErrResultTooLarge = fmt.Errorf("%w: result too large", ErrSkillFailed)
	// ErrPermissionDenied reports a Skill Service that refused the caller:
	// an HTTP 401 or 403 answer, or a tool error starting with
	// "permission denied" or "forbidden". It is not an ErrSkillFailed.
	ErrPermissionDenied = fault.Permanent(errors.New("skills: permission denied"))
	// ErrInvalidTenant reports a tenant id that does not match ^[A-Za-z0-9_-]{1,64}$.
	ErrInvalidTenant = fault.Permanent(errors.New("skills: invalid tenant id"))
	// ErrInvalidConfig reports an unusable Config passed to NewClient.
	ErrInvalidConfig = fault.Permanent(errors.New("skills: invalid config"))
	// ErrInvalidArguments reports skill arguments that are not a JSON
	// object, or that the skill's server rejected as invalid params
	// (JSON-RPC -32602: a required argument missing, one of the wrong
	// type).
	ErrInvalidArguments = fault.Permanent(errors.New("skills: invalid arguments"))
	// ErrRedirect reports a Skill Service that answered with an HTTP
	// redirect, which the client does not follow (see refuseRedirect).
	ErrRedirect = fault.Permanent(errors.New("skills: the skill service redirects"))
	// ErrInvalidResponse reports a Skill Service answer that cannot be decoded.
	ErrInvalidResponse = errors.New("skills: invalid response")
	// ErrBrokenContract reports a tool's result that is not what the tool
	// declares it returns: no JSON object from a tool with an output
	// schema. It is an ErrInvalidResponse, and permanent: the same call
	// answers the same way.
	ErrBrokenContract = fault.Permanent(fmt.Errorf("%w: the result breaks the tool's output schema", ErrInvalidResponse))
	// ErrClosed reports use of a Client after Close.
	ErrClosed = errors.New("skills: client closed")
	// ErrNotCalled reports a call that failed before it reached any skill
	// (the caller could not read what it needed to route the call): it
	// says nothing of the skill's health.
	ErrNotCalled = errors.New("skills: the call did not reach the skill")
)

var tenantPattern = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)

// ValidTenant reports whether tenant is an acceptable tenant id, i.e. matches
// ^[A-Za-z0-9_-]{1,64}$. Such ids are safe to place in a URL path segment.
func ValidTenant(tenant string) bool {
	return tenantPattern.MatchString(tenant)
}
