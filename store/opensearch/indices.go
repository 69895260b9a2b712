package opensearch

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"

	osgo "github.com/opensearch-project/opensearch-go/v4"
	"github.com/opensearch-project/opensearch-go/v4/opensearchapi"

	"github.com/agentbus/agentbus/store"
)

// ismPluginName is the component name of the ISM plugin in _cat/plugins.
const ismPluginName = "opensearch-index-management"

// EnsureIndices makes the cluster match the store's layout, creating what
// is missing: the indices agent_memory, agent_plans, agent_souls,
// agent_sessions and agent_definitions; the index template of the agent_events backing indices
// and the first of them behind the agent_events write alias; and, when ISM
// is in use, the retention policy. Existing indices get the current
// mapping (PUT _mapping), so new fields are added and an incompatible
// mapping (for example another embedding dimension) fails loudly. It is
// idempotent and safe to run concurrently; New calls it.
func (s *Store) EnsureIndices(ctx context.Context) error {
	ctx, cancel := s.withTimeout(ctx)
	defer cancel()
	if err := s.detectISM(ctx); err != nil {
		return err
	}
	if s.hasISM.Load() {
		if err := s.ensurePolicy(ctx); err != nil {
			return err
		}
	}
	for _, idx := range []struct{ index, name string }{
		{store.IndexMemory, s.names.memory},
		{store.IndexPlans, s.names.plans},
		{store.IndexSouls, s.names.souls},
		{store.IndexSessions, s.names.sessions},
		{store.IndexDefinitions, s.names.definitions},
	} {
		if err := s.ensureIndex(ctx, idx.index, idx.name); err != nil {
			return err
		}
	}
	if err := s.ensureEvents(ctx); err != nil {
		return err
	}
	return s.ensureExecutions(ctx)
}

// detectISM decides s.hasISM from cfg.ISM and the cluster's plugins.
func (s *Store) detectISM(ctx context.Context) error {
	if s.cfg.ISM == ISMDisabled {
		s.hasISM.Store(false)
		return nil
	}
	resp, err := s.api.Cat.Plugins(ctx, &opensearchapi.CatPluginsReq{})
	if err := check(resp.Inspect().Response, err, "list plugins"); err != nil {
		return err
	}
	found := slices.ContainsFunc(resp.Plugins, func(p opensearchapi.CatPluginResp) bool {
		return p.Component == ismPluginName
	})
	s.hasISM.Store(found)
	if !found && s.cfg.ISM == ISMRequired {
		return ErrISMUnavailable
	}
	return nil
}

// indexBody is the body of a create-index request.
func (s *Store) indexBody(index, rolloverAlias string) (obj, error) {
	mapping, err := Mapping(index, s.cfg)
	if err != nil {
		return nil, err
	}
	return obj{"settings": indexSettings(index, s.cfg, rolloverAlias), "mappings": mapping}, nil
}

// ensureIndex creates index name, or puts the current mapping on it.
func (s *Store) ensureIndex(ctx context.Context, index, name string) error {
	exists, err := s.exists(ctx, name)
	if err != nil {
		return err
	}
	if !exists {
		body, err := s.indexBody(index, "")
		if err != nil {
			return err
		}
		created, err := s.createIndex(ctx, name, body)
		if err != nil || created {
			return err
		}
		// Another process created it first: fall through to the mapping.
	}
	return s.putMapping(ctx, index, name)
}

// exists reports whether name is an index or an alias.
func (s *Store) exists(ctx context.Context, name string) (bool, error) {
	resp, err := s.api.Indices.Exists(ctx, opensearchapi.IndicesExistsReq{Indices: []string{name}})
	switch {
	case resp != nil && resp.StatusCode == http.StatusOK:
		return true, nil
	case resp != nil && resp.StatusCode == http.StatusNotFound:
		return false, nil
	case err == nil:
		err = fmt.Errorf("unexpected status %d", resp.StatusCode)
	}
	return false, fmt.Errorf("opensearch: check index %s: %w", name, err)
}

// createIndex creates name with body. created is false, without error, if
// the index already existed (a concurrent creator won).
func (s *Store) createIndex(ctx context.Context, name string, body obj) (created bool, err error) {
	r, err := jsonBody(body)
	if err != nil {
		return false, err
	}
	resp, err := s.api.Indices.Create(ctx, opensearchapi.IndicesCreateReq{Index: name, Body: r})
	if errorType(err) == "resource_already_exists_exception" {
		return false, nil
	}
	if err := check(resp.Inspect().Response, err, "create index "+name); err != nil {
		return false, err
	}
	return true, nil
}

// putMapping puts the current mapping of index on name (an index or alias).
func (s *Store) putMapping(ctx context.Context, index, name string) error {
	mapping, err := Mapping(index, s.cfg)
	if err != nil {
		return err
	}
	r, err := jsonBody(mapping)
	if err != nil {
		return err
	}
	resp, err := s.api.Indices.Mapping.Put(ctx, opensearchapi.MappingPutReq{Indices: []string{name}, Body: r})
	return check(resp.Inspect().Response, err, "update mapping of "+name)
}

// ensureEvents puts the template of the events backing indices and makes
// sure the write alias exists, with the current mapping.
func (s *Store) ensureEvents(ctx context.Context) error {
	alias := ""
	if s.hasISM.Load() {
		alias = s.names.events
	}
	body, err := s.indexBody(store.IndexEvents, alias)
	if err != nil {
		return err
	}
	tmpl := obj{
		"index_patterns": []string{s.names.events + "-*"},
		"priority":       100,
		"template":       body,
		"_meta":          obj{"managed_by": "agentbus"},
	}
	r, err := jsonBody(tmpl)
	if err != nil {
		return err
	}
	tresp, err := s.api.IndexTemplate.Create(ctx, opensearchapi.IndexTemplateCreateReq{IndexTemplate: s.names.eventsTemplate, Body: r})
	if err := check(tresp.Inspect().Response, err, "put index template "+s.names.eventsTemplate); err != nil {
		return err
	}
	exists, err := s.exists(ctx, s.names.events)
	if err != nil {
		return err
	}
	if !exists {
		// The template supplies the same settings and mapping; they are
		// repeated so that a template overridden by another one of higher
		// priority cannot leave the index without its strict mapping.
		body["aliases"] = obj{s.names.events: obj{"is_write_index": true}}
		created, err := s.createIndex(ctx, s.names.firstEventsIndex(), body)
		if err != nil || created {
			return err
		}
	}
	if err := s.putMapping(ctx, store.IndexEvents, s.names.events); err != nil {
		return err
	}
	if s.hasISM.Load() {
		return s.manageEventIndices(ctx)
	}
	return nil
}

// errorType returns the OpenSearch error type ("resource_already_exists_exception",
// ...) carried by err, or "".
func errorType(err error) string {
	var se *osgo.StructError
	if errors.As(err, &se) {
		return se.Err.Type
	}
	return ""
}
