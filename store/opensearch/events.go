package opensearch

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"

	"github.com/opensearch-project/opensearch-go/v4/opensearchapi"

	"github.com/agentbus/agentbus/store"
)

// tracePage is the number of events Trace reads per request.
const tracePage = 500

// BulkError reports the items of a bulk request OpenSearch refused. An
// item already present (409 on create) is not an error.
type BulkError struct {
	// Index is the index or alias written to.
	Index string
	// Items are the refused items, in request order.
	Items []BulkItemError
}

// BulkItemError is one refused item of a bulk request.
type BulkItemError struct {
	// ID is the document id.
	ID string
	// Status is the item's HTTP status, for example 400 for a mapping
	// error or 429 when the cluster is overloaded.
	Status int
	// Type and Reason are OpenSearch's error type and message.
	Type   string
	Reason string
}

// Error implements error.
func (e *BulkError) Error() string {
	var sb strings.Builder
	fmt.Fprintf(&sb, "opensearch: bulk %s: %d item(s) refused", e.Index, len(e.Items))
	for i, it := range e.Items {
		if i == 3 {
			fmt.Fprintf(&sb, "; ...")
			break
		}
		fmt.Fprintf(&sb, "; %q: %d %s: %s", it.ID, it.Status, it.Type, it.Reason)
	}
	return sb.String()
}

// bulkDoc is one document of a bulk create.
type bulkDoc struct {
	id, routing string
	source      []byte
}

// AppendEvents validates every event first and rejects the whole batch
// with the first *store.SchemaError, sending nothing. Otherwise it indexes
// the batch with one bulk request through the agent_events write alias:
// document id = event id, op_type create (a repeated event id answers 409,
// which counts as already stored), routing = tenant id (a tenant's events
// share a shard, which Trace relies on for append order). Every item's
// result is checked: any refused item fails the call with a *BulkError.
// The items before and after a refused one may be stored; retrying the
// batch is safe. It waits until the events are searchable (for Trace).
func (s *Store) AppendEvents(ctx context.Context, evs []store.Event) error {
	docs := make([]bulkDoc, len(evs))
	for i, ev := range evs {
		if err := store.Validate(store.IndexEvents, ev); err != nil {
			return err
		}
		id, err := docID("event id", ev.EventID)
		if err != nil {
			return err
		}
		data, err := json.Marshal(ev)
		if err != nil {
			return fmt.Errorf("opensearch: encode event %q: %w", ev.EventID, err)
		}
		docs[i] = bulkDoc{id: id, routing: ev.TenantID, source: data}
	}
	if len(docs) == 0 {
		return nil
	}
	ctx, cancel := s.withTimeout(ctx)
	defer cancel()
	return s.bulkCreate(ctx, s.names.events, docs)
}

// bulkCreate sends docs as "create" actions to index and checks every
// item. It is the raw path: documents are not validated here.
func (s *Store) bulkCreate(ctx context.Context, index string, docs []bulkDoc) error {
	var body bytes.Buffer
	enc := json.NewEncoder(&body)
	for _, d := range docs {
		action := obj{"create": obj{"_index": index, "_id": d.id, "routing": d.routing}}
		if err := enc.Encode(action); err != nil {
			return fmt.Errorf("opensearch: encode bulk action: %w", err)
		}
		body.Write(bytes.TrimSpace(d.source))
		body.WriteByte('\n')
	}
	resp, err := s.api.Bulk(ctx, opensearchapi.BulkReq{Body: &body, Params: opensearchapi.BulkParams{Refresh: refreshWaitFor}})
	if err := check(resp.Inspect().Response, err, "bulk "+index); err != nil {
		return err
	}
	if len(resp.Items) != len(docs) {
		return fmt.Errorf("opensearch: bulk %s: %d items answered for %d sent", index, len(resp.Items), len(docs))
	}
	var failed []BulkItemError
	for i, item := range resp.Items {
		res, ok := item["create"]
		if !ok {
			failed = append(failed, BulkItemError{ID: docs[i].id, Type: "unexpected_response", Reason: fmt.Sprintf("no create result: %v", item)})
			continue
		}
		switch {
		case res.Status >= 200 && res.Status < 300:
		case res.Status == http.StatusConflict && res.Error != nil && res.Error.Type == "version_conflict_engine_exception":
			// Already indexed: a re-delivered event.
		default:
			it := BulkItemError{ID: res.ID, Status: res.Status}
			if res.Error != nil {
				it.Type, it.Reason = res.Error.Type, res.Error.Reason
			}
			failed = append(failed, it)
		}
	}
	if len(failed) > 0 {
		return &BulkError{Index: index, Items: failed}
	}
	return nil
}

// Trace returns the events of q.SessionID and/or q.PlanID within
// q.TenantID, ordered by ts and then by append order, each event id once.
// Append order is the order of _seq_no within a backing index (the
// tenant's events share one shard) and backing indices in creation order.
// OpenSearch sorts dates in milliseconds, so the result is finally sorted
// stably by the full-precision ts. It pages with search_after.
func (s *Store) Trace(ctx context.Context, q store.TraceQuery) ([]store.Event, error) {
	if q.TenantID == "" {
		return nil, fmt.Errorf("opensearch: trace without tenant: %w", store.ErrInvalidArgument)
	}
	if q.SessionID == "" && q.PlanID == "" {
		return nil, fmt.Errorf("opensearch: trace without session or plan: %w", store.ErrInvalidArgument)
	}
	filter := []obj{term("tenant_id", q.TenantID)}
	if q.SessionID != "" {
		filter = append(filter, term("session_id", q.SessionID))
	}
	if q.PlanID != "" {
		filter = append(filter, term("plan_id", q.PlanID))
	}
	body := obj{
		"size":  tracePage,
		"query": obj{"bool": obj{"filter": filter}},
		"sort":  []obj{{"ts": "asc"}, {"_index": "asc"}, {"_seq_no": "asc"}},
	}
	var params opensearchapi.SearchParams
	if !strings.Contains(q.TenantID, ",") { // the routing parameter is a comma-separated list
		params.Routing = []string{q.TenantID}
	}
	ctx, cancel := s.withTimeout(ctx)
	defer cancel()
	var out []store.Event
	seen := map[string]bool{}
	for {
		resp, err := s.search(ctx, s.names.events, body, params)
		if err != nil {
			return nil, fmt.Errorf("opensearch: trace: %w", err)
		}
		for _, h := range resp.Hits.Hits {
			var ev store.Event
			if err := json.Unmarshal(h.Source, &ev); err != nil {
				return nil, fmt.Errorf("opensearch: decode event %q: %w", h.ID, err)
			}
			// The same id can exist in two backing indices if it was
			// re-appended after a rollover; keep the first.
			if !seen[ev.EventID] {
				seen[ev.EventID] = true
				out = append(out, ev)
			}
		}
		if len(resp.Hits.Hits) < tracePage {
			break
		}
		body["search_after"] = resp.Hits.Hits[len(resp.Hits.Hits)-1].Sort
	}
	slices.SortStableFunc(out, func(a, b store.Event) int { return a.TS.Compare(b.TS) })
	return out, nil
}
