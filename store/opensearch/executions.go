package opensearch

import (
	"bytes"
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	json "github.com/go-json-experiment/json/v1"
	"github.com/opensearch-project/opensearch-go/v4/opensearchapi"
	"github.com/opensearch-project/opensearch-go/v4/plugins/ism"

	"github.com/agentbus/agentbus/store"
)

// Execution records live in one index per UTC day of their created_at,
// <prefix>agent_executions-YYYY.MM.DD, all read through the alias
// <prefix>agent_executions. A record's index follows from its own
// created_at, so writing a run's record again (a redelivered
// run.finished) overwrites the same document. The ISM policy
// ExecutionPolicy deletes a day's index once it is ExecutionTTL + 1 day
// old: the index is created on its day at the earliest, so every record
// in it is older than the TTL by then. Reads filter created_at >= now -
// ExecutionTTL, so a record past its TTL is never returned in the hours
// before its index goes.
const executionDayLayout = "2006.01.02"

// executionIndex is the index of records created at t.
func (n names) executionIndex(t time.Time) string {
	return n.executions + "-" + t.UTC().Format(executionDayLayout)
}

// executionPolicyDescription identifies the policy's content.
func executionPolicyDescription(cfg Config) string {
	return fmt.Sprintf("agentbus agent_executions retention v1: delete a day's index at age %s (TTL %s + 1d)",
		ismDuration(cfg.ExecutionTTL+24*time.Hour), ismDuration(cfg.ExecutionTTL))
}

// ExecutionPolicy returns the ISM policy of the agent_executions day
// indices: "hot" until the index is ExecutionTTL + 1 day old, then
// "delete". Its ism_template attaches it to every new day index.
func ExecutionPolicy(cfg Config) ism.PolicyBody {
	cfg = cfg.withDefaults()
	n := newNames(cfg.IndexPrefix)
	return ism.PolicyBody{
		Description:  executionPolicyDescription(cfg),
		DefaultState: "hot",
		States: []ism.PolicyState{
			{
				Name:    "hot",
				Actions: []ism.PolicyStateAction{},
				Transitions: &[]ism.PolicyStateTransition{{
					StateName:  "delete",
					Conditions: &ism.PolicyStateTransitionCondition{MinIndexAge: ismDuration(cfg.ExecutionTTL + 24*time.Hour)},
				}},
			},
			{
				Name:        "delete",
				Actions:     []ism.PolicyStateAction{{Delete: &ism.PolicyStateDelete{}}},
				Transitions: &[]ism.PolicyStateTransition{},
			},
		},
		Template: []ism.Template{{IndexPatterns: []string{n.executions + "-*"}, Priority: 100}},
	}
}

// ensureExecutions puts the index template of the day indices (settings,
// strict mapping, the read alias) and creates today's index, so the alias
// always resolves; existing day indices get the current mapping.
func (s *Store) ensureExecutions(ctx context.Context) error {
	if s.hasISM.Load() {
		if err := s.putPolicy(ctx, s.names.executionsPolicy, ExecutionPolicy(s.cfg)); err != nil {
			return err
		}
	}
	body, err := s.indexBody(store.IndexExecutions, "")
	if err != nil {
		return err
	}
	body["aliases"] = obj{s.names.executions: obj{}}
	r, err := jsonBody(obj{
		"index_patterns": []string{s.names.executions + "-*"},
		"priority":       100,
		"template":       body,
		"_meta":          obj{"managed_by": "agentbus"},
	})
	if err != nil {
		return err
	}
	tresp, err := s.api.IndexTemplate.Create(ctx, opensearchapi.IndexTemplateCreateReq{IndexTemplate: s.names.executions, Body: r})
	if err := check(tresp.Inspect().Response, err, "put index template "+s.names.executions); err != nil {
		return err
	}
	if _, err := s.DeleteExpiredExecutions(ctx, time.Now()); err != nil {
		return err
	}
	today := s.names.executionIndex(time.Now())
	exists, err := s.exists(ctx, today)
	if err != nil {
		return err
	}
	if !exists {
		if _, err := s.createIndex(ctx, today, body); err != nil {
			return err
		}
	}
	return s.putMapping(ctx, store.IndexExecutions, s.names.executions)
}

// executionID is the document id of a record: the tenant is
// length-prefixed, so no two (tenant, id) pairs share an id.
func executionID(tenantID, id string) string {
	return strconv.Itoa(len(tenantID)) + ":" + tenantID + ":" + id
}

// ExecutionTTL is how long the store keeps execution records.
func (s *Store) ExecutionTTL() time.Duration { return s.cfg.ExecutionTTL }

// PutExecution validates e and writes it into the day index of its
// created_at, replacing the record of the same run. The write waits
// until it is searchable.
func (s *Store) PutExecution(ctx context.Context, e store.Execution) error {
	data, err := store.Encode(store.IndexExecutions, e)
	if err != nil {
		return err
	}
	id, err := docID("execution id", executionID(e.TenantID, e.ExecutionID))
	if err != nil {
		return err
	}
	ctx, cancel := s.withTimeout(ctx)
	defer cancel()
	index := s.names.executionIndex(e.CreatedAt)
	write := func() (*opensearchapi.IndexResp, error) {
		return s.api.Index(ctx, opensearchapi.IndexReq{Index: index, DocumentID: id,
			Body: bytes.NewReader(data), Params: opensearchapi.IndexParams{Refresh: refreshWaitFor}})
	}
	resp, err := write()
	if errorType(err) == "index_not_found_exception" {
		// A new day: its index is created explicitly (a cluster may
		// forbid auto-creation); the template gives it its ISM policy
		// (settings, mapping and alias are repeated here). A new day is
		// also when the days past the TTL go, ISM or not.
		if _, derr := s.DeleteExpiredExecutions(ctx, time.Now()); derr != nil {
			return derr
		}
		body, berr := s.indexBody(store.IndexExecutions, "")
		if berr != nil {
			return berr
		}
		body["aliases"] = obj{s.names.executions: obj{}}
		if _, cerr := s.createIndex(ctx, index, body); cerr != nil {
			return cerr
		}
		resp, err = write()
	}
	return check(resp.Inspect().Response, err, fmt.Sprintf("index execution %q", e.ExecutionID))
}

// DeleteExpiredExecutions deletes the day indices of execution records
// whose every record is past the TTL (the days before now - TTL), and
// returns their names. The store calls it when it opens and on each new
// day's first write, so records go at their TTL on a node without the ISM
// plugin too (where ExecutionPolicy does the same in the background).
func (s *Store) DeleteExpiredExecutions(ctx context.Context, now time.Time) ([]string, error) {
	ctx, cancel := s.withTimeout(ctx)
	defer cancel()
	pattern := s.names.executions + "-*"
	resp, err := s.api.Indices.Get(ctx, opensearchapi.IndicesGetReq{Indices: []string{pattern},
		Params: opensearchapi.IndicesGetParams{AllowNoIndices: new(true), IgnoreUnavailable: new(true)}})
	if err := check(resp.Inspect().Response, err, "list "+pattern); err != nil {
		return nil, err
	}
	// A day index holds records created on that day: all are past the TTL
	// once the day's end is older than now - TTL.
	horizon := now.UTC().Add(-s.cfg.ExecutionTTL)
	var expired []string
	for name := range *resp.IndicesGetRespData {
		day, err := time.Parse(executionDayLayout, strings.TrimPrefix(name, s.names.executions+"-"))
		if err != nil || !strings.HasPrefix(name, s.names.executions+"-") {
			continue // not a day index of this store
		}
		if !day.Add(24 * time.Hour).After(horizon) {
			expired = append(expired, name)
		}
	}
	if len(expired) == 0 {
		return nil, nil
	}
	slices.Sort(expired)
	del, err := s.api.Indices.Delete(ctx, opensearchapi.IndicesDeleteReq{Indices: expired,
		Params: opensearchapi.IndicesDeleteParams{IgnoreUnavailable: new(true)}})
	if err := check(del.Inspect().Response, err, "delete expired execution indices"); err != nil {
		return nil, err
	}
	return expired, nil
}

// liveSince is the oldest created_at a record may have to be returned.
func (s *Store) liveSince() time.Time { return time.Now().Add(-s.cfg.ExecutionTTL) }

// GetExecution returns the tenant's record of execution id, or
// store.ErrNotFound (also once it is past the TTL).
func (s *Store) GetExecution(ctx context.Context, tenantID, id string) (store.Execution, error) {
	if tenantID == "" || id == "" {
		return store.Execution{}, fmt.Errorf("opensearch: execution needs a tenant and an id: %w", store.ErrInvalidArgument)
	}
	docid, err := docID("execution id", executionID(tenantID, id))
	if err != nil {
		return store.Execution{}, err
	}
	got, err := s.listExecutions(ctx, obj{"ids": obj{"values": []string{docid}}}, store.ExecutionQuery{TenantID: tenantID, Limit: 1})
	if err != nil {
		return store.Execution{}, err
	}
	if len(got) == 0 {
		return store.Execution{}, fmt.Errorf("opensearch: execution %q: %w", id, store.ErrNotFound)
	}
	return got[0], nil
}

// ListExecutions returns the tenant's records q selects, newest first,
// as store.ExecutionQuery specifies.
func (s *Store) ListExecutions(ctx context.Context, q store.ExecutionQuery) ([]store.Execution, error) {
	if q.TenantID == "" {
		return nil, fmt.Errorf("opensearch: executions need a tenant: %w", store.ErrInvalidArgument)
	}
	return s.listExecutions(ctx, nil, q)
}

func (s *Store) listExecutions(ctx context.Context, extra obj, q store.ExecutionQuery) ([]store.Execution, error) {
	since := s.liveSince()
	if q.Since.After(since) {
		since = q.Since
	}
	filter := []obj{term("tenant_id", q.TenantID),
		{"range": obj{"created_at": obj{"gte": since.UTC().Format(time.RFC3339Nano)}}}}
	for field, v := range map[string]string{"agent_id": q.AgentID, "session_id": q.SessionID, "user_id": q.UserID, "status": q.Status} {
		if v != "" {
			filter = append(filter, term(field, v))
		}
	}
	if extra != nil {
		filter = append(filter, extra)
	}
	ctx, cancel := s.withTimeout(ctx)
	defer cancel()
	body := obj{
		"size":  q.EffectiveLimit(),
		"query": obj{"bool": obj{"filter": filter}},
		"sort":  []obj{{"created_at": "desc"}, {"execution_id": "asc"}},
	}
	// The alias may have no index left (every day index deleted by ISM
	// and none created since): that is no record, not an error.
	yes := true
	resp, err := s.search(ctx, s.names.executions, body, opensearchapi.SearchParams{AllowNoIndices: &yes, IgnoreUnavailable: &yes})
	if err != nil {
		return nil, err
	}
	out := make([]store.Execution, 0, len(resp.Hits.Hits))
	for _, h := range resp.Hits.Hits {
		var e store.Execution
		if err := json.Unmarshal(h.Source, &e); err != nil {
			return nil, fmt.Errorf("opensearch: decode execution %q: %w", h.ID, err)
		}
		out = append(out, e)
	}
	return out, nil
}
