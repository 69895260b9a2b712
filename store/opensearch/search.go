package opensearch

import (
	"context"
	"fmt"

	"github.com/opensearch-project/opensearch-go/v4/opensearchapi"
)

// term is the query DSL term query {"term": {field: value}}.
func term(field string, value any) obj {
	return obj{"term": obj{field: value}}
}

// search runs body on index and fails unless every shard answered in time:
// a partial result would silently drop documents.
func (s *Store) search(ctx context.Context, index string, body obj, params opensearchapi.SearchParams) (*opensearchapi.SearchResp, error) {
	r, err := jsonBody(body)
	if err != nil {
		return nil, err
	}
	resp, err := s.api.Search(ctx, &opensearchapi.SearchReq{Indices: []string{index}, Body: r, Params: params})
	if err := check(resp.Inspect().Response, err, "search "+index); err != nil {
		return nil, err
	}
	if resp.Shards.Failed > 0 {
		reason := ""
		if len(resp.Shards.Failures) > 0 {
			f := resp.Shards.Failures[0]
			reason = ": " + f.Reason.Type + ": " + f.Reason.Reason
		}
		return nil, fmt.Errorf("opensearch: search %s: %d of %d shards failed%s", index, resp.Shards.Failed, resp.Shards.Total, reason)
	}
	if resp.Timeout {
		return nil, fmt.Errorf("opensearch: search %s timed out", index)
	}
	return resp, nil
}
