package opensearch

import (
	"bytes"
	"cmp"
	"context"
	"fmt"
	"net/http"
	"slices"
	"time"

	json "github.com/go-json-experiment/json/v1"
	"github.com/opensearch-project/opensearch-go/v4/opensearchapi"

	"github.com/agentbus/agentbus/store"
)

// PutMemory validates m and indexes it under the document id m.Key. A zero
// m.Version writes unconditionally (upsert); otherwise the write carries
// if_seq_no/if_primary_term and fails with store.ErrConflict if the stored
// document has another version or does not exist. It waits until the
// write is searchable and returns m with its new Version. A schema
// violation, or an embedding OpenSearch cannot index (wrong dimension,
// all zeros), returns *store.SchemaError and sends nothing.
func (s *Store) PutMemory(ctx context.Context, m store.Memory) (store.Memory, error) {
	id, data, err := s.encodeMemory(m)
	if err != nil {
		return store.Memory{}, err
	}
	params := opensearchapi.IndexParams{Refresh: refreshWaitFor}
	if !m.Version.IsZero() {
		if m.Version.SeqNo < 0 || m.Version.PrimaryTerm < 1 {
			return store.Memory{}, fmt.Errorf("opensearch: memory %q: version %+v: %w", m.Key, m.Version, store.ErrConflict)
		}
		seq, term := int(m.Version.SeqNo), int(m.Version.PrimaryTerm)
		params.IfSeqNo, params.IfPrimaryTerm = &seq, &term
	}
	return s.indexMemory(ctx, m, id, data, params)
}

// CreateMemory validates m and indexes it only if no document has the id
// m.Key (op_type=create); otherwise it fails with store.ErrConflict.
// m.Version is ignored. It returns m with its new Version.
func (s *Store) CreateMemory(ctx context.Context, m store.Memory) (store.Memory, error) {
	id, data, err := s.encodeMemory(m)
	if err != nil {
		return store.Memory{}, err
	}
	return s.indexMemory(ctx, m, id, data, opensearchapi.IndexParams{Refresh: refreshWaitFor, OpType: "create"})
}

func (s *Store) indexMemory(ctx context.Context, m store.Memory, id string, data []byte, params opensearchapi.IndexParams) (store.Memory, error) {
	ctx, cancel := s.withTimeout(ctx)
	defer cancel()
	resp, err := s.api.Index(ctx, opensearchapi.IndexReq{
		Index: s.names.memory, DocumentID: id, Body: bytes.NewReader(data), Params: params,
	})
	if status(resp.Inspect().Response) == http.StatusConflict {
		return store.Memory{}, fmt.Errorf("opensearch: memory %q: %w", m.Key, store.ErrConflict)
	}
	if err := check(resp.Inspect().Response, err, fmt.Sprintf("index memory %q", m.Key)); err != nil {
		return store.Memory{}, err
	}
	m.Version = store.Version{SeqNo: int64(resp.SeqNo), PrimaryTerm: int64(resp.PrimaryTerm)}
	return m, nil
}

// GetMemory returns the memory stored under key with its Version (from
// _seq_no and _primary_term), or store.ErrNotFound. It is real-time.
func (s *Store) GetMemory(ctx context.Context, key string) (store.Memory, error) {
	id, err := docID("memory key", key)
	if err != nil {
		return store.Memory{}, err
	}
	ctx, cancel := s.withTimeout(ctx)
	defer cancel()
	resp, err := s.api.Document.Get(ctx, opensearchapi.DocumentGetReq{Index: s.names.memory, DocumentID: id})
	if status(resp.Inspect().Response) == http.StatusNotFound {
		return store.Memory{}, fmt.Errorf("opensearch: memory %q: %w", key, store.ErrNotFound)
	}
	if err := check(resp.Inspect().Response, err, fmt.Sprintf("get memory %q", key)); err != nil {
		return store.Memory{}, err
	}
	var m store.Memory
	if err := json.Unmarshal(resp.Source, &m); err != nil {
		return store.Memory{}, fmt.Errorf("opensearch: decode memory %q: %w", key, err)
	}
	m.Version = store.Version{SeqNo: int64(resp.SeqNo), PrimaryTerm: int64(resp.PrimaryTerm)}
	return m, nil
}

// maxTopK is the largest k OpenSearch's knn query (and result window)
// accepts.
const maxTopK = 10000

// QueryMemory runs a k-NN query (k = q.TopK, default store.DefaultTopK, at
// most 10000) on
// the embedding field with the tenant, and the scope and user when set, in
// the knn query's filter (efficient filtering: the candidates are filtered
// before the top k are chosen, so another tenant's closer vectors never
// crowd out this tenant's), and so are q.Within's selectors and expiry (a
// ttl_at at or before q's time is no candidate). Hits carry the exact
// cosine similarity and are ordered by it, best first, then by key.
// Memories without an embedding are
// never returned; a vector whose dimension differs from the index's
// matches nothing, as in the embedded backend. An all-zero vector has no
// direction: every candidate scores 0 and they come ordered by key.
func (s *Store) QueryMemory(ctx context.Context, q store.MemoryQuery) ([]store.MemoryHit, error) {
	if q.TenantID == "" {
		return nil, fmt.Errorf("opensearch: memory query without tenant: %w", store.ErrInvalidArgument)
	}
	if len(q.Vector) == 0 {
		return nil, fmt.Errorf("opensearch: memory query without vector: %w", store.ErrInvalidArgument)
	}
	if err := q.CheckWithin(); err != nil {
		return nil, err
	}
	if len(q.Vector) != s.cfg.Dimension {
		return nil, nil
	}
	topK := q.TopK
	if topK <= 0 {
		topK = store.DefaultTopK
	}
	topK = min(topK, maxTopK)
	filter := memoryFilter(q)
	body := obj{"size": topK, "seq_no_primary_term": true}
	if isZero(q.Vector) {
		// Lucene's cosine refuses a zero query vector; no candidate is
		// closer than another, so list them by key like the embedded store.
		body["query"] = obj{"bool": obj{"filter": append(filter, obj{"exists": obj{"field": "embedding"}})}}
		body["sort"] = []obj{{"key": "asc"}}
	} else {
		body["query"] = obj{"knn": obj{"embedding": obj{
			"vector": q.Vector,
			"k":      topK,
			"filter": obj{"bool": obj{"filter": filter}},
		}}}
	}
	ctx, cancel := s.withTimeout(ctx)
	defer cancel()
	resp, err := s.search(ctx, s.names.memory, body, opensearchapi.SearchParams{})
	if err != nil {
		return nil, fmt.Errorf("opensearch: query memory: %w", err)
	}
	hits := make([]store.MemoryHit, 0, len(resp.Hits.Hits))
	for _, h := range resp.Hits.Hits {
		var m store.Memory
		if err := json.Unmarshal(h.Source, &m); err != nil {
			return nil, fmt.Errorf("opensearch: decode memory %q: %w", h.ID, err)
		}
		if h.SeqNo != nil && h.PrimaryTerm != nil {
			m.Version = store.Version{SeqNo: int64(*h.SeqNo), PrimaryTerm: int64(*h.PrimaryTerm)}
		}
		hits = append(hits, store.MemoryHit{Memory: m, Score: store.Cosine(q.Vector, m.Embedding)})
	}
	slices.SortStableFunc(hits, func(a, b store.MemoryHit) int {
		if c := cmp.Compare(b.Score, a.Score); c != 0 {
			return c
		}
		return cmp.Compare(a.Key, b.Key)
	})
	if len(hits) > topK {
		hits = hits[:topK]
	}
	return hits, nil
}

// memoryFilter is the filter of q's candidates: its tenant, scope and
// user, one of its selectors (by scope, ids and key prefix), and no
// ttl_at at or before q's time.
func memoryFilter(q store.MemoryQuery) []obj {
	filter := []obj{term("tenant_id", q.TenantID)}
	if q.Scope != "" {
		filter = append(filter, term("scope", q.Scope))
	}
	if q.UserID != "" {
		filter = append(filter, term("user_id", q.UserID))
	}
	if len(q.Within) > 0 {
		any := make([]obj, len(q.Within))
		for i, sel := range q.Within {
			must := []obj{term("scope", sel.Scope), {"prefix": obj{"key": sel.KeyPrefix(q.TenantID)}}}
			if sel.UserID != "" {
				must = append(must, term("user_id", sel.UserID))
			}
			if sel.SessionID != "" {
				must = append(must, term("session_id", sel.SessionID))
			}
			any[i] = obj{"bool": obj{"filter": must}}
		}
		filter = append(filter, obj{"bool": obj{"should": any, "minimum_should_match": 1}})
	}
	live := []obj{
		{"bool": obj{"must_not": []obj{{"exists": obj{"field": "ttl_at"}}}}},
		{"range": obj{"ttl_at": obj{"gt": q.Time().UTC().Format(time.RFC3339Nano)}}},
	}
	return append(filter, obj{"bool": obj{"should": live, "minimum_should_match": 1}})
}

// PruneMemory deletes every memory whose ttl_at is at or before before
// (a delete by query, refreshed) and returns how many it deleted.
func (s *Store) PruneMemory(ctx context.Context, before time.Time) (int, error) {
	body, err := jsonBody(obj{"query": obj{"range": obj{"ttl_at": obj{"lte": before.UTC().Format(time.RFC3339Nano)}}}})
	if err != nil {
		return 0, err
	}
	ctx, cancel := s.withTimeout(ctx)
	defer cancel()
	refresh := true
	resp, err := s.api.Document.DeleteByQuery(ctx, opensearchapi.DocumentDeleteByQueryReq{Indices: []string{s.names.memory},
		Body: body, Params: opensearchapi.DocumentDeleteByQueryParams{Conflicts: "proceed", Refresh: &refresh}})
	if err := check(resp.Inspect().Response, err, "prune memory"); err != nil {
		return 0, err
	}
	if resp.TimedOut || len(resp.Failures) > 0 {
		return resp.Deleted, fmt.Errorf("opensearch: prune memory: %d deleted, then it failed or timed out", resp.Deleted)
	}
	return resp.Deleted, nil
}

// encodeMemory validates m, checks what the knn_vector mapping would
// refuse, and returns its document id and JSON.
func (s *Store) encodeMemory(m store.Memory) (string, []byte, error) {
	if err := store.Validate(store.IndexMemory, m); err != nil {
		return "", nil, err
	}
	if n := len(m.Embedding); n > 0 {
		if n != s.cfg.Dimension {
			return "", nil, &store.SchemaError{Index: store.IndexMemory, Field: "/embedding",
				Reason: fmt.Sprintf("has %d dimensions, the index has %d", n, s.cfg.Dimension)}
		}
		if isZero(m.Embedding) {
			return "", nil, &store.SchemaError{Index: store.IndexMemory, Field: "/embedding",
				Reason: "is all zeros, which has no cosine similarity"}
		}
	}
	id, err := docID("memory key", m.Key)
	if err != nil {
		return "", nil, err
	}
	data, err := json.Marshal(m)
	if err != nil {
		return "", nil, fmt.Errorf("opensearch: encode memory %q: %w", m.Key, err)
	}
	return id, data, nil
}

func isZero(v []float32) bool {
	for _, x := range v {
		if x != 0 {
			return false
		}
	}
	return true
}
