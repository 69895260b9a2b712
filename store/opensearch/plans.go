package opensearch

import (
	"bytes"
	"context"
	"fmt"
	"math"
	"net/http"

	json "github.com/go-json-experiment/json/v1"
	"github.com/opensearch-project/opensearch-go/v4/opensearchapi"

	"github.com/agentbus/agentbus/store"
)

// PutPlan validates p and indexes it with OpenSearch external versioning
// (version_type=external, version=version), so the cluster itself keeps
// the highest version: a write whose version is not greater than the
// stored one is refused and PutPlan returns store.ErrStale. As in the
// embedded store, re-writing the stored version with identical content
// succeeds without writing (an idempotent redelivery). version must not be
// negative. It waits until the write is searchable (for Health).
func (s *Store) PutPlan(ctx context.Context, p store.Plan, version int64) error {
	if version < 0 {
		return fmt.Errorf("opensearch: plan %q: negative version %d: %w", p.PlanID, version, store.ErrInvalidArgument)
	}
	doc, err := store.Encode(store.IndexPlans, p)
	if err != nil {
		return err
	}
	id, err := docID("plan id", p.PlanID)
	if err != nil {
		return err
	}
	ctx, cancel := s.withTimeout(ctx)
	defer cancel()
	for {
		v := int(version)
		resp, err := s.api.Index(ctx, opensearchapi.IndexReq{
			Index: s.names.plans, DocumentID: id, Body: bytes.NewReader(doc),
			Params: opensearchapi.IndexParams{Version: &v, VersionType: "external", Refresh: refreshWaitFor},
		})
		if status(resp.Inspect().Response) != http.StatusConflict {
			return check(resp.Inspect().Response, err, fmt.Sprintf("index plan %q", p.PlanID))
		}
		stored, storedVersion, err := s.getPlan(ctx, p.PlanID)
		if err != nil {
			return fmt.Errorf("opensearch: plan %q: read after version conflict: %w", p.PlanID, err)
		}
		if storedVersion < version {
			continue // the newer write it conflicted with is gone; retry
		}
		if storedVersion == version {
			same, err := sameJSON(stored, doc)
			if err != nil {
				return err
			}
			if same {
				return nil
			}
		}
		return fmt.Errorf("opensearch: plan %q: version %d, stored %d: %w", p.PlanID, version, storedVersion, store.ErrStale)
	}
}

// sameJSON reports whether stored encodes to doc.
func sameJSON(stored store.Plan, doc []byte) (bool, error) {
	got, err := json.Marshal(stored)
	if err != nil {
		return false, fmt.Errorf("opensearch: encode plan %q: %w", stored.PlanID, err)
	}
	return bytes.Equal(got, doc), nil
}

// GetPlan returns the plan planID of tenantID and its external version
// (_version), or store.ErrNotFound. It is real-time.
func (s *Store) GetPlan(ctx context.Context, tenantID, planID string) (store.Plan, int64, error) {
	if tenantID == "" {
		return store.Plan{}, 0, fmt.Errorf("opensearch: plan without tenant: %w", store.ErrInvalidArgument)
	}
	p, version, err := s.getPlan(ctx, planID)
	if err == nil && p.TenantID != tenantID {
		// Another tenant's plan reads exactly as a missing one.
		return store.Plan{}, 0, fmt.Errorf("opensearch: plan %q: %w", planID, store.ErrNotFound)
	}
	return p, version, err
}

// getPlan reads a plan whatever its tenant.
func (s *Store) getPlan(ctx context.Context, planID string) (store.Plan, int64, error) {
	id, err := docID("plan id", planID)
	if err != nil {
		return store.Plan{}, 0, err
	}
	ctx, cancel := s.withTimeout(ctx)
	defer cancel()
	resp, err := s.api.Document.Get(ctx, opensearchapi.DocumentGetReq{Index: s.names.plans, DocumentID: id})
	if status(resp.Inspect().Response) == http.StatusNotFound {
		return store.Plan{}, 0, fmt.Errorf("opensearch: plan %q: %w", planID, store.ErrNotFound)
	}
	if err := check(resp.Inspect().Response, err, fmt.Sprintf("get plan %q", planID)); err != nil {
		return store.Plan{}, 0, err
	}
	var p store.Plan
	if err := json.Unmarshal(resp.Source, &p); err != nil {
		return store.Plan{}, 0, fmt.Errorf("opensearch: decode plan %q: %w", planID, err)
	}
	return p, int64(resp.Version), nil
}

// maxStatuses bounds the status buckets of Health; the schema allows six.
const maxStatuses = 64

// Health aggregates the plans of tenantID server-side: a terms aggregation
// on status and a sum of replan_count (missing counts as 0), combined with
// store.PlanHealthFromCounts so the result matches store.ComputePlanHealth.
func (s *Store) Health(ctx context.Context, tenantID string) (store.PlanHealth, error) {
	if tenantID == "" {
		return store.PlanHealth{}, fmt.Errorf("opensearch: health without tenant: %w", store.ErrInvalidArgument)
	}
	body := obj{
		"size":  0,
		"query": obj{"bool": obj{"filter": []obj{term("tenant_id", tenantID)}}},
		"aggs": obj{
			"by_status": obj{"terms": obj{"field": "status", "size": maxStatuses}},
			"replans":   obj{"sum": obj{"field": "replan_count", "missing": 0}},
		},
	}
	ctx, cancel := s.withTimeout(ctx)
	defer cancel()
	resp, err := s.search(ctx, s.names.plans, body, opensearchapi.SearchParams{})
	if err != nil {
		return store.PlanHealth{}, fmt.Errorf("opensearch: health: %w", err)
	}
	var aggs struct {
		ByStatus struct {
			SumOtherDocCount int `json:"sum_other_doc_count"`
			Buckets          []struct {
				Key      string `json:"key"`
				DocCount int    `json:"doc_count"`
			} `json:"buckets"`
		} `json:"by_status"`
		Replans struct {
			Value float64 `json:"value"`
		} `json:"replans"`
	}
	if err := json.Unmarshal(resp.Aggregations, &aggs); err != nil {
		return store.PlanHealth{}, fmt.Errorf("opensearch: health: decode aggregations: %w", err)
	}
	if aggs.ByStatus.SumOtherDocCount > 0 {
		return store.PlanHealth{}, fmt.Errorf("opensearch: health: more than %d plan statuses", maxStatuses)
	}
	byStatus := make(map[string]int, len(aggs.ByStatus.Buckets))
	for _, b := range aggs.ByStatus.Buckets {
		byStatus[b.Key] = b.DocCount
	}
	return store.PlanHealthFromCounts(byStatus, int(math.Round(aggs.Replans.Value))), nil
}
