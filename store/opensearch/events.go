package opensearch

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	json "github.com/go-json-experiment/json/v1"
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
// batch is safe. It waits until the events are searchable (for Trace and
// Events).
func (s *Store) AppendEvents(ctx context.Context, evs []store.Event) error {
	docs := make([]bulkDoc, len(evs))
	for i, ev := range evs {
		data, err := store.Encode(store.IndexEvents, ev)
		if err != nil {
			return err
		}
		id, err := docID("event id", ev.EventID)
		if err != nil {
			return err
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
	params := tenantRouting(q.TenantID)
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

// maxEventsPage bounds the size of one Events request: OpenSearch's
// default index.max_result_window.
const maxEventsPage = 10_000

// Events returns the tenant's events that match q, newest first, as
// store.EventQuery specifies. The filters run in a bool query (routed to
// the tenant's shard) sorted by ts descending, then event_id ascending.
// OpenSearch keeps dates in milliseconds, so the ts range sent is widened
// to whole milliseconds and every hit is checked again with q.Match at
// full precision; the query pages with search_after until the events
// kept cannot change any more (q.EffectiveLimit() of them, and the next
// hit is in an earlier millisecond than the last one needed), then sorts
// them by store.CompareNewestFirst and cuts. Each event id is returned
// once: the same id can exist in two backing indices if it was
// re-appended after a rollover, and the first hit of it is kept.
func (s *Store) Events(ctx context.Context, q store.EventQuery) ([]store.Event, error) {
	if q.TenantID == "" {
		return nil, fmt.Errorf("opensearch: events without tenant: %w", store.ErrInvalidArgument)
	}
	limit := q.EffectiveLimit()
	filter := []obj{term("tenant_id", q.TenantID)}
	if len(q.EventTypes) > 0 {
		filter = append(filter, obj{"terms": obj{"event_type": q.EventTypes}})
	}
	if q.SkillID != "" {
		filter = append(filter, term("skill_id", q.SkillID))
	}
	if q.TaskID != "" {
		filter = append(filter, term("task_id", q.TaskID))
	}
	if rng := tsRange(q.Since, q.Until); rng != nil {
		filter = append(filter, obj{"range": obj{"ts": rng}})
	}
	boolQuery := obj{"filter": filter}
	if q.LargeResponse != nil {
		if *q.LargeResponse {
			boolQuery["filter"] = append(filter, term("large_response", true))
		} else {
			boolQuery["must_not"] = []obj{term("large_response", true)}
		}
	}
	page := min(limit+1, maxEventsPage)
	body := obj{
		"size":             page,
		"track_total_hits": false,
		"query":            obj{"bool": boolQuery},
		// _index and _seq_no make the order total, for search_after.
		"sort": []obj{{"ts": "desc"}, {"event_id": "asc"}, {"_index": "asc"}, {"_seq_no": "asc"}},
	}
	params := tenantRouting(q.TenantID)
	ctx, cancel := s.withTimeout(ctx)
	defer cancel()
	var out []store.Event
	seen := map[string]bool{}
	for {
		resp, err := s.search(ctx, s.names.events, body, params)
		if err != nil {
			return nil, fmt.Errorf("opensearch: events: %w", err)
		}
		hits := resp.Hits.Hits
		var lastMS int64
		for _, h := range hits {
			var ev store.Event
			if err := json.Unmarshal(h.Source, &ev); err != nil {
				return nil, fmt.Errorf("opensearch: decode event %q: %w", h.ID, err)
			}
			lastMS = ev.TS.UnixMilli()
			if seen[ev.EventID] || !q.Match(ev) {
				continue
			}
			seen[ev.EventID] = true
			out = append(out, ev)
		}
		if len(hits) < page {
			break
		}
		// Hits come in milliseconds: an event not read yet is in the
		// millisecond of the last hit or an earlier one. It can only
		// displace one of the first limit events if it shares the
		// millisecond of the limit-th.
		if len(out) >= limit && lastMS < out[limit-1].TS.UnixMilli() {
			break
		}
		body["search_after"] = hits[len(hits)-1].Sort
	}
	slices.SortFunc(out, store.CompareNewestFirst)
	if len(out) > limit {
		out = out[:limit]
	}
	return out, nil
}

// tsRange returns the range query on ts, in epoch milliseconds, that
// holds every event with since <= ts < until (a zero time is no bound),
// or nil when there is no bound. OpenSearch stores ts truncated to the
// millisecond, so the bounds are widened to whole milliseconds: the hits
// may include events of the bounds' milliseconds that are just outside.
func tsRange(since, until time.Time) obj {
	rng := obj{}
	if !since.IsZero() {
		rng["gte"] = since.UnixMilli() // floor
	}
	if !until.IsZero() {
		ms := until.UnixMilli()
		if time.UnixMilli(ms).Before(until) {
			ms++ // ceiling
		}
		rng["lt"] = ms
	}
	if len(rng) == 0 {
		return nil
	}
	rng["format"] = "epoch_millis"
	return rng
}

// tenantRouting is the search parameters of a query of one tenant's
// events: routed to the tenant's shard, as AppendEvents stores them.
func tenantRouting(tenant string) opensearchapi.SearchParams {
	var params opensearchapi.SearchParams
	if !strings.Contains(tenant, ",") { // the routing parameter is a comma-separated list
		params.Routing = []string{tenant}
	}
	return params
}
