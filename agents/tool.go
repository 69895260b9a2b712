package agents

import (
	"fmt"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"time"

	json "github.com/go-json-experiment/json/v1"

	"github.com/agentbus/agentbus/schema"
	"github.com/agentbus/agentbus/store"
)

// Tool types (seed 002): a system tool is built in; a custom one is the
// tenant's.
const (
	// ToolTypeSystem is a built-in tool: listed, never written.
	ToolTypeSystem = "system"
	// ToolTypeCustom is a tenant-defined tool.
	ToolTypeCustom = "custom"
)

// HandlerWebhook is the only custom handler type: an HTTPS POST to the
// tenant's endpoint, signed with the tool's secret.
const HandlerWebhook = "webhook"

// Bounds of a webhook tool's handler.
const (
	// DefaultToolTimeout is the timeout of a webhook call that sets none.
	DefaultToolTimeout = 10 * time.Second
	// MaxToolTimeout bounds timeout_ms.
	MaxToolTimeout = 30 * time.Second
	// DefaultToolRetries is the retries of an idempotent tool that sets
	// none; a tool that is not idempotent is called once.
	DefaultToolRetries = 2
	// MaxToolRetries bounds max_retries.
	MaxToolRetries = 5
	// DefaultToolBackoff is the first retry's delay when backoff_ms is
	// not set; each next one doubles.
	DefaultToolBackoff = 200 * time.Millisecond
	// MaxToolBackoff bounds backoff_ms.
	MaxToolBackoff = 10 * time.Second
	// MinSecretLen and MaxSecretLen bound a webhook secret, in bytes.
	MinSecretLen, MaxSecretLen = 16, 256
	// MaxParametersLen bounds a tool's JSON Schema, in bytes.
	MaxParametersLen = 32 << 10
)

// Tool validation codes (answered with status 400, like the others).
const (
	// CodeInvalidToolName: a tool name that is not a function name.
	CodeInvalidToolName = "invalid_tool_name"
	// CodeReservedToolName: a custom tool named like a system tool.
	CodeReservedToolName = "reserved_tool_name"
	// CodeToolNameTaken: another of the tenant's tools has the name (409).
	CodeToolNameTaken = "tool_name_taken"
	// CodeDescriptionRequired: a tool without a description.
	CodeDescriptionRequired = "description_required"
	// CodeInvalidParameters: parameters is not a JSON Schema of an object.
	CodeInvalidParameters = "invalid_parameters"
	// CodeInvalidHandler: the handler's type is not webhook.
	CodeInvalidHandler = "invalid_handler"
	// CodeInvalidURL: the webhook URL is not an absolute https URL.
	CodeInvalidURL = "invalid_url"
	// CodeInvalidTimeout: timeout_ms is out of range.
	CodeInvalidTimeout = "invalid_timeout"
	// CodeInvalidRetries: max_retries or backoff_ms is out of range, or
	// retries are asked of a tool that is not idempotent.
	CodeInvalidRetries = "invalid_retries"
	// CodeSecretRequired: a webhook tool created without its secret.
	CodeSecretRequired = "secret_required"
	// CodeInvalidSecret: a secret shorter or longer than allowed.
	CodeInvalidSecret = "invalid_secret"
)

// ToolHandler is how a custom tool runs: a webhook's endpoint and call
// policy. The secret it signs with is never part of it.
type ToolHandler struct {
	Type string `json:"type"`
	URL  string `json:"url"`
	// TimeoutMS bounds each attempt; a call that times out fails its step.
	TimeoutMS int `json:"timeout_ms"`
	// Idempotent tools are retried on network errors, 5xx answers and
	// timeouts; others are called once.
	Idempotent bool `json:"idempotent"`
	MaxRetries *int `json:"max_retries,omitempty"`
	BackoffMS  int  `json:"backoff_ms,omitempty"`
}

// Timeout is the handler's per-attempt timeout.
func (h ToolHandler) Timeout() time.Duration { return time.Duration(h.TimeoutMS) * time.Millisecond }

// Retries is how many times a failed attempt is repeated: 0 unless the
// tool is idempotent.
func (h ToolHandler) Retries() int {
	if !h.Idempotent || h.MaxRetries == nil {
		return 0
	}
	return *h.MaxRetries
}

// Backoff is the delay before the first retry.
func (h ToolHandler) Backoff() time.Duration { return time.Duration(h.BackoffMS) * time.Millisecond }

// ToolSpec is what a caller writes of a custom tool.
type ToolSpec struct {
	Name        string          `json:"name"`
	Description string          `json:"description"`
	Parameters  json.RawMessage `json:"parameters"`
	Handler     ToolHandler     `json:"handler"`
	Status      string          `json:"status"`
}

// Tool is a tool as the API answers it: a tenant's custom tool or a
// system tool (no tenant, no version).
type Tool struct {
	ToolID   string `json:"tool_id"`
	TenantID string `json:"tenant_id,omitempty"`
	Type     string `json:"type"`
	ToolSpec
	Version   int64     `json:"version,omitempty"`
	CreatedAt time.Time `json:"created_at,omitzero"`
	UpdatedAt time.Time `json:"updated_at,omitzero"`
}

// toolNameRE is a function name a model can call.
var toolNameRE = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_-]{0,63}$`)

// Normalize fills the defaults: status active, the webhook type, the
// default timeout, retries of an idempotent tool and their backoff.
func (s *ToolSpec) Normalize() {
	s.Name = strings.TrimSpace(s.Name)
	if s.Status == "" {
		s.Status = StatusActive
	}
	h := &s.Handler
	if h.Type == "" {
		h.Type = HandlerWebhook
	}
	if h.TimeoutMS == 0 {
		h.TimeoutMS = int(DefaultToolTimeout / time.Millisecond)
	}
	if h.Idempotent && h.MaxRetries == nil {
		n := DefaultToolRetries
		h.MaxRetries = &n
	}
	if h.Retries() > 0 && h.BackoffMS == 0 {
		h.BackoffMS = int(DefaultToolBackoff / time.Millisecond)
	}
}

// Validate checks a normalized spec and returns the first violation; it
// compiles the parameters with the schema package. Unique names are
// checked by CheckToolName, which needs the tenant's tools.
func (s ToolSpec) Validate() *Error {
	checks := []func() *Error{
		func() *Error { return text("name", s.Name, MaxNameLen, CodeNameRequired) },
		func() *Error {
			switch {
			case !toolNameRE.MatchString(s.Name):
				return invalid(CodeInvalidToolName, "name", "a tool name is a function name matching %s", toolNameRE)
			case IsSystemTool(s.Name):
				return invalid(CodeReservedToolName, "name", "%q is a system tool", s.Name)
			}
			return nil
		},
		func() *Error { return text("description", s.Description, MaxDescriptionLen, CodeDescriptionRequired) },
		s.validateParameters,
		s.Handler.validate,
		func() *Error { return oneOf(CodeInvalidStatus, "status", s.Status, StatusActive, StatusInactive) },
	}
	for _, check := range checks {
		if err := check(); err != nil {
			return err
		}
	}
	return nil
}

func (s ToolSpec) validateParameters() *Error {
	if len(s.Parameters) == 0 {
		return invalid(CodeInvalidParameters, "parameters", "parameters is required: a JSON Schema of the arguments object")
	}
	if len(s.Parameters) > MaxParametersLen {
		return invalid(CodeInvalidParameters, "parameters", "parameters is longer than %d bytes", MaxParametersLen)
	}
	var doc map[string]any
	if err := json.Unmarshal(s.Parameters, &doc); err != nil {
		return invalid(CodeInvalidParameters, "parameters", "parameters is not a JSON object")
	}
	if t, ok := doc["type"]; ok && t != "object" {
		return invalid(CodeInvalidParameters, "parameters.type", "the arguments are an object: type must be \"object\"")
	}
	if _, err := schema.Compile(s.Parameters); err != nil {
		return invalid(CodeInvalidParameters, "parameters", "not a valid JSON Schema: %v", err)
	}
	return nil
}

func (h ToolHandler) validate() *Error {
	if h.Type != HandlerWebhook {
		return invalid(CodeInvalidHandler, "handler.type", "handler.type must be %q, not %q", HandlerWebhook, h.Type)
	}
	u, err := url.Parse(h.URL)
	switch {
	case err != nil || u.Scheme != "https" || u.Host == "" || u.Hostname() == "":
		return invalid(CodeInvalidURL, "handler.url", "handler.url must be an absolute https URL")
	case u.User != nil:
		return invalid(CodeInvalidURL, "handler.url", "handler.url must not carry credentials: the call is signed with the tool's secret")
	case u.Fragment != "" || len(h.URL) > 2048:
		return invalid(CodeInvalidURL, "handler.url", "handler.url has a fragment or is longer than 2048 bytes")
	}
	if t := h.Timeout(); t <= 0 || t > MaxToolTimeout {
		return invalid(CodeInvalidTimeout, "handler.timeout_ms", "timeout_ms must be from 1 to %d", MaxToolTimeout.Milliseconds())
	}
	if h.MaxRetries != nil {
		switch n := *h.MaxRetries; {
		case n < 0 || n > MaxToolRetries:
			return invalid(CodeInvalidRetries, "handler.max_retries", "max_retries must be from 0 to %d", MaxToolRetries)
		case n > 0 && !h.Idempotent:
			return invalid(CodeInvalidRetries, "handler.max_retries", "only an idempotent tool is retried: set idempotent or max_retries 0")
		}
	}
	if b := h.Backoff(); b < 0 || b > MaxToolBackoff {
		return invalid(CodeInvalidRetries, "handler.backoff_ms", "backoff_ms must be from 0 to %d", MaxToolBackoff.Milliseconds())
	}
	return nil
}

// ValidateSecret checks a webhook secret as written: required on create
// (present false), and of MinSecretLen to MaxSecretLen bytes.
func ValidateSecret(secret string, present bool) *Error {
	switch {
	case !present || secret == "":
		return invalid(CodeSecretRequired, "secret", "a webhook tool needs a secret to sign its calls with")
	case len(secret) < MinSecretLen || len(secret) > MaxSecretLen:
		return invalid(CodeInvalidSecret, "secret", "a secret has %d to %d bytes", MinSecretLen, MaxSecretLen)
	}
	return nil
}

// CheckToolName reports another of the tenant's tools (by id, with its
// name) that has the name of tool self.
func CheckToolName(self, name string, tenantTools map[string]string) *Error {
	for id, other := range tenantTools {
		if id != self && strings.EqualFold(other, name) {
			return invalid(CodeToolNameTaken, "name", "tool %s is named %q already", id, other)
		}
	}
	return nil
}

// Definition is the tool as the store keeps it.
func (t Tool) Definition() (store.Definition, error) {
	spec, err := json.Marshal(t.ToolSpec)
	if err != nil {
		return store.Definition{}, fmt.Errorf("agents: encode tool %q: %w", t.ToolID, err)
	}
	return store.Definition{TenantID: t.TenantID, Kind: store.KindTool, ID: t.ToolID, Name: t.Name, Status: t.Status,
		Version: t.Version, Spec: spec, CreatedAt: t.CreatedAt, UpdatedAt: t.UpdatedAt}, nil
}

// ToolOf reads a custom tool from its stored definition.
func ToolOf(d store.Definition) (Tool, error) {
	if d.Kind != store.KindTool {
		return Tool{}, fmt.Errorf("agents: definition %q is a %s, not a tool", d.ID, d.Kind)
	}
	t := Tool{ToolID: d.ID, TenantID: d.TenantID, Type: ToolTypeCustom, Version: d.Version, CreatedAt: d.CreatedAt, UpdatedAt: d.UpdatedAt}
	if err := json.Unmarshal(d.Spec, &t.ToolSpec); err != nil {
		return Tool{}, fmt.Errorf("agents: decode tool %q: %w", d.ID, err)
	}
	t.Normalize()
	return t, nil
}

// IsSystemTool reports whether name is a system tool's.
func IsSystemTool(name string) bool {
	return slices.ContainsFunc(SystemTools, func(t Tool) bool { return strings.EqualFold(t.Name, name) })
}

// SystemTool returns the system tool named name.
func SystemTool(name string) (Tool, bool) {
	i := slices.IndexFunc(SystemTools, func(t Tool) bool { return t.Name == name })
	if i < 0 {
		return Tool{}, false
	}
	return SystemTools[i], true
}
