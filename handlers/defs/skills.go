package defs

import (
	"context"
	"net/http"
	"slices"

	"github.com/agentbus/agentbus/agents"
	"github.com/agentbus/agentbus/handlers"
	"github.com/agentbus/agentbus/store"
)

// The skills API (seed 002 Skills pattern): the tenant's skills at
// /agent/skills, a named prompt with the tools it adds, loaded by an
// agent's model (load_skill) when it asks for it. Same versioning as
// agents (ETag, If-Match or the body's version, 409 version_conflict);
// a name is unique among the tenant's skills (409 skill_name_taken); a
// skill an agent lists cannot be deleted (409 skill_in_use), and an agent
// cannot list a skill the tenant does not have (400 unknown_skill).

// SkillBody is the body of POST /agent/skills and PUT
// /agent/skills/{skill_id}.
type SkillBody struct {
	agents.SkillSpec
	Version int64 `json:"version,omitempty"`
}

// skillRoutes registers the skills API on mux.
func (g *API) skillRoutes(mux *http.ServeMux) {
	mux.HandleFunc("POST /agent/skills", g.createSkill)
	mux.HandleFunc("GET /agent/skills", g.listSkills)
	mux.HandleFunc("GET /agent/skills/{skill_id}", g.getSkill)
	mux.HandleFunc("PUT /agent/skills/{skill_id}", g.putSkill)
	mux.HandleFunc("DELETE /agent/skills/{skill_id}", g.deleteSkill)
}

// tenantSkills loads the tenant's skills.
func tenantSkills(ctx context.Context, st Lister, tenant string) ([]agents.Skill, error) {
	return list(ctx, st, tenant, store.KindSkill, agents.SkillOf)
}

// checkAgentSkills answers 400 unknown_skill when an agent lists a skill
// the tenant does not have.
func (g *API) checkAgentSkills(w http.ResponseWriter, r *http.Request, tenant string, spec *agents.AgentSpec) bool {
	if len(spec.Skills) == 0 {
		return true
	}
	all, err := tenantSkills(r.Context(), g.store, tenant)
	if g.definitionError(w, err, "skill") {
		return false
	}
	have := map[string]bool{}
	for _, s := range all {
		have[s.SkillID] = true
	}
	if err := agents.CheckSkills(spec, have); err != nil {
		WriteInvalid(w, err)
		return false
	}
	return true
}

// checkSkill validates a normalized spec of skill id, its name unique
// among the tenant's skills, answering the request itself when it
// fails. It returns how many skills the tenant has.
func (g *API) checkSkill(w http.ResponseWriter, r *http.Request, tenant, id string, spec *agents.SkillSpec) (int, bool) {
	if err := spec.Validate(id); err != nil {
		WriteInvalid(w, err)
		return 0, false
	}
	all, err := tenantSkills(r.Context(), g.store, tenant)
	if g.definitionError(w, err, "skill") {
		return 0, false
	}
	if slices.ContainsFunc(all, func(s agents.Skill) bool { return s.Name == spec.Name && s.SkillID != id }) {
		handlers.WriteJSON(w, http.StatusConflict, DefinitionError{Error: agents.Error{Code: agents.CodeSkillNameTaken, Field: "name",
			Message: "another skill of the tenant is named " + spec.Name}})
		return 0, false
	}
	return len(all), true
}

func (g *API) createSkill(w http.ResponseWriter, r *http.Request) {
	tenant, ok := g.cfg.Tenant(w, r)
	if !ok {
		return
	}
	var body SkillBody
	if !g.cfg.Decode(w, r, &body) {
		return
	}
	if body.Version != 0 {
		handlers.WriteError(w, http.StatusBadRequest, "invalid_request", "a new skill has no version: it gets version 1")
		return
	}
	body.Normalize()
	id := newDefinitionID("skill")
	n, ok := g.checkSkill(w, r, tenant, id, &body.SkillSpec)
	if !ok || !underLimit(w, n, "skill") {
		return
	}
	now := g.cfg.Now()
	s := agents.Skill{SkillID: id, TenantID: tenant, SkillSpec: body.SkillSpec, Version: 1, CreatedAt: now, UpdatedAt: now}
	if g.saveSkill(w, r, s, 0) {
		w.Header().Set("Location", "/agent/skills/"+id)
		writeVersioned(w, http.StatusCreated, s.Version, s)
	}
}

func (g *API) saveSkill(w http.ResponseWriter, r *http.Request, s agents.Skill, expected int64) bool {
	d, err := s.Definition()
	if err == nil {
		err = g.store.PutDefinition(r.Context(), d, expected)
	}
	return !g.definitionError(w, err, "skill")
}

func (g *API) listSkills(w http.ResponseWriter, r *http.Request) {
	tenant, ok := g.cfg.Tenant(w, r)
	if !ok {
		return
	}
	all, err := tenantSkills(r.Context(), g.store, tenant)
	if g.definitionError(w, err, "skill") {
		return
	}
	if status := r.URL.Query().Get("status"); status != "" {
		all = slices.DeleteFunc(all, func(s agents.Skill) bool { return s.Status != status })
	}
	handlers.WriteJSON(w, http.StatusOK, map[string]any{"skills": all})
}

// loadSkill reads the tenant's skill named in the path.
func (g *API) loadSkill(w http.ResponseWriter, r *http.Request) (agents.Skill, bool) {
	tenant, ok := g.cfg.Tenant(w, r)
	if !ok {
		return agents.Skill{}, false
	}
	id, ok := pathID(w, r, "skill_id", "skill")
	if !ok {
		return agents.Skill{}, false
	}
	d, err := g.store.GetDefinition(r.Context(), tenant, store.KindSkill, id)
	if g.definitionError(w, err, "skill") {
		return agents.Skill{}, false
	}
	s, err := agents.SkillOf(d)
	return s, !g.definitionError(w, err, "skill")
}

func (g *API) getSkill(w http.ResponseWriter, r *http.Request) {
	if s, ok := g.loadSkill(w, r); ok {
		writeVersioned(w, http.StatusOK, s.Version, s)
	}
}

func (g *API) putSkill(w http.ResponseWriter, r *http.Request) {
	var body SkillBody
	if !g.cfg.Decode(w, r, &body) {
		return
	}
	expected, ok := expectedVersion(w, r, body.Version)
	if !ok {
		return
	}
	cur, ok := g.loadSkill(w, r)
	if !ok {
		return
	}
	if cur.Version != expected {
		handlers.WriteError(w, http.StatusConflict, "version_conflict", "skill is at another version: read it again and retry with its version")
		return
	}
	body.Normalize()
	if _, ok := g.checkSkill(w, r, cur.TenantID, cur.SkillID, &body.SkillSpec); !ok {
		return
	}
	next := agents.Skill{SkillID: cur.SkillID, TenantID: cur.TenantID, SkillSpec: body.SkillSpec, Version: expected + 1,
		CreatedAt: cur.CreatedAt, UpdatedAt: g.cfg.Now()}
	if g.saveSkill(w, r, next, expected) {
		writeVersioned(w, http.StatusOK, next.Version, next)
	}
}

func (g *API) deleteSkill(w http.ResponseWriter, r *http.Request) {
	expected, err := ifMatch(r)
	if err != nil {
		handlers.WriteError(w, http.StatusBadRequest, "invalid_request", err.Error())
		return
	}
	s, ok := g.loadSkill(w, r)
	if !ok {
		return
	}
	all, err := Agents(r.Context(), g.store, s.TenantID)
	if g.definitionError(w, err, "agent") {
		return
	}
	for _, a := range all {
		if slices.Contains(a.Skills, s.SkillID) {
			handlers.WriteError(w, http.StatusConflict, "skill_in_use", "agent "+a.AgentID+" lists this skill")
			return
		}
	}
	err = g.store.DeleteDefinition(r.Context(), s.TenantID, store.KindSkill, s.SkillID, expected)
	if g.definitionError(w, err, "skill") {
		return
	}
	handlers.WriteJSON(w, http.StatusOK, map[string]any{"skill_id": s.SkillID, "deleted": true})
}
