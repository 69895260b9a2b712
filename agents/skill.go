package agents

import (
	"fmt"
	"slices"
	"strings"
	"time"

	json "github.com/go-json-experiment/json/v1"

	"github.com/agentbus/agentbus/orch"
	"github.com/agentbus/agentbus/store"
)

// Skill statuses: only an active skill can be loaded.
const (
	SkillActive   = "active"
	SkillInactive = "inactive"
)

// Skill validation codes, answered by the HTTP API with status 400 (409
// for a taken name).
const (
	// CodeInvalidSkillName: the skill's name is not a load_skill name.
	CodeInvalidSkillName = "invalid_skill_name"
	// CodeSkillNameTaken: another skill of the tenant has the name.
	CodeSkillNameTaken = "skill_name_taken"
	// CodePromptRequired: a skill without a prompt.
	CodePromptRequired = "prompt_required"
	// CodeUnknownSkill: an agent names a skill the tenant does not have.
	CodeUnknownSkill = "unknown_skill"
)

// SkillSpec is what a caller writes of a skill (seed 002 Skill): the name
// the model loads it by, what it is for (shown to the model), the
// prompt it adds once loaded and the tools it makes available.
type SkillSpec struct {
	Name        string   `json:"name"`
	Description string   `json:"description"`
	Prompt      string   `json:"prompt"`
	Tools       []string `json:"tools"`
	ParentSkill string   `json:"parent_skill,omitempty"`
	Status      string   `json:"status"`
}

// Skill is a skill definition as the API answers it.
type Skill struct {
	SkillID  string `json:"skill_id"`
	TenantID string `json:"tenant_id"`
	SkillSpec
	Version   int64     `json:"version"`
	CreatedAt time.Time `json:"created_at"`
	UpdatedAt time.Time `json:"updated_at"`
}

// Normalize fills the defaults: status active, no tools rather than null.
func (s *SkillSpec) Normalize() {
	s.Name = strings.TrimSpace(s.Name)
	if s.Status == "" {
		s.Status = SkillActive
	}
	if s.Tools == nil {
		s.Tools = []string{}
	}
}

// Validate checks a normalized spec of the skill self (empty on create)
// and returns the first violation.
func (s SkillSpec) Validate(self string) *Error {
	checks := []func() *Error{
		func() *Error {
			if !idRE.MatchString(s.Name) || strings.HasPrefix(s.Name, orch.TransitionPrefix) {
				return invalid(CodeInvalidSkillName, "name", "a skill's name matches %s", idRE)
			}
			return nil
		},
		func() *Error { return text("description", s.Description, MaxDescriptionLen, CodeDescriptionRequired) },
		func() *Error { return text("prompt", s.Prompt, MaxPromptLen, CodePromptRequired) },
		func() *Error { return names(CodeInvalidTool, "tools", s.Tools, toolRE) },
		func() *Error {
			if s.ParentSkill != "" && (!idRE.MatchString(s.ParentSkill) || s.ParentSkill == self) {
				return invalid(CodeInvalidSkill, "parent_skill", "parent_skill names another skill by id")
			}
			return nil
		},
		func() *Error { return oneOf(CodeInvalidStatus, "status", s.Status, SkillActive, SkillInactive) },
	}
	for _, check := range checks {
		if err := check(); err != nil {
			return err
		}
	}
	return nil
}

// Definition is the skill as the store keeps it.
func (s Skill) Definition() (store.Definition, error) {
	spec, err := json.Marshal(s.SkillSpec)
	if err != nil {
		return store.Definition{}, fmt.Errorf("agents: encode skill %q: %w", s.SkillID, err)
	}
	return store.Definition{TenantID: s.TenantID, Kind: store.KindSkill, ID: s.SkillID, Name: s.Name, Status: s.Status,
		Version: s.Version, Spec: spec, CreatedAt: s.CreatedAt, UpdatedAt: s.UpdatedAt}, nil
}

// SkillOf reads a skill from its stored definition.
func SkillOf(d store.Definition) (Skill, error) {
	if d.Kind != store.KindSkill {
		return Skill{}, fmt.Errorf("agents: definition %q is a %s, not a skill", d.ID, d.Kind)
	}
	s := Skill{SkillID: d.ID, TenantID: d.TenantID, Version: d.Version, CreatedAt: d.CreatedAt, UpdatedAt: d.UpdatedAt}
	if err := json.Unmarshal(d.Spec, &s.SkillSpec); err != nil {
		return Skill{}, fmt.Errorf("agents: decode skill %q: %w", d.ID, err)
	}
	s.Normalize()
	return s, nil
}

// RunDef is what a run records of a skill its agent may load.
func (s Skill) RunDef() orch.SkillDef {
	return orch.SkillDef{ID: s.SkillID, Name: s.Name, Description: s.Description, Prompt: s.Prompt, Tools: slices.Clone(s.Tools)}
}

// CheckSkills checks an agent's skills against the tenant's skills (by
// id): each must exist.
func CheckSkills(spec *AgentSpec, tenantSkills map[string]bool) *Error {
	for i, id := range spec.Skills {
		if !tenantSkills[id] {
			return invalid(CodeUnknownSkill, fmt.Sprintf("skills[%d]", i), "skill %q is not defined", id)
		}
	}
	return nil
}
