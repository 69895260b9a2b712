package opensearch

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"strconv"

	json "github.com/go-json-experiment/json/v1"
	"github.com/opensearch-project/opensearch-go/v4/opensearchapi"

	"github.com/agentbus/agentbus/store"
)

// definitionID is the document id of a definition: the tenant and the
// kind are length-prefixed, so no two (tenant, kind, id) triples share an
// id.
func definitionID(tenantID, kind, id string) string {
	return strconv.Itoa(len(tenantID)) + ":" + tenantID + ":" + strconv.Itoa(len(kind)) + ":" + kind + ":" + id
}

// storedDefinition is a definition with its OpenSearch concurrency token.
type storedDefinition struct {
	def       store.Definition
	seq, term int
}

// PutDefinition validates d and writes it. With expected 0 it creates d,
// which must have version 1, and fails with store.ErrConflict if the
// definition exists. Otherwise it replaces the stored definition only if
// its version is expected and d.Version is expected+1: store.ErrNotFound
// if there is none, store.ErrConflict if its version differs or another
// write won the race. The write waits until it is searchable.
func (s *Store) PutDefinition(ctx context.Context, d store.Definition, expected int64) error {
	data, err := store.Encode(store.IndexDefinitions, d)
	if err != nil {
		return err
	}
	if d.Version != expected+1 || expected < 0 {
		return fmt.Errorf("opensearch: definition %q: version %d after %d: %w", d.ID, d.Version, expected, store.ErrInvalidArgument)
	}
	id, err := docID("definition id", definitionID(d.TenantID, d.Kind, d.ID))
	if err != nil {
		return err
	}
	params := opensearchapi.IndexParams{Refresh: refreshWaitFor, OpType: "create"}
	if expected > 0 {
		cur, err := s.getDefinition(ctx, d.TenantID, d.Kind, d.ID)
		if err != nil {
			return err
		}
		if cur.def.Version != expected {
			return fmt.Errorf("opensearch: definition %q: stored version %d, expected %d: %w", d.ID, cur.def.Version, expected, store.ErrConflict)
		}
		params.OpType = ""
		params.IfSeqNo, params.IfPrimaryTerm = &cur.seq, &cur.term
	}
	ctx, cancel := s.withTimeout(ctx)
	defer cancel()
	resp, err := s.api.Index(ctx, opensearchapi.IndexReq{Index: s.names.definitions, DocumentID: id,
		Body: bytes.NewReader(data), Params: params})
	if status(resp.Inspect().Response) == http.StatusConflict {
		return fmt.Errorf("opensearch: definition %q: %w", d.ID, store.ErrConflict)
	}
	return check(resp.Inspect().Response, err, fmt.Sprintf("index definition %q", d.ID))
}

// GetDefinition returns the definition (tenantID, kind, id), or
// store.ErrNotFound. It is real-time.
func (s *Store) GetDefinition(ctx context.Context, tenantID, kind, id string) (store.Definition, error) {
	cur, err := s.getDefinition(ctx, tenantID, kind, id)
	return cur.def, err
}

func (s *Store) getDefinition(ctx context.Context, tenantID, kind, id string) (storedDefinition, error) {
	if tenantID == "" || kind == "" || id == "" {
		return storedDefinition{}, fmt.Errorf("opensearch: definition needs a tenant, a kind and an id: %w", store.ErrInvalidArgument)
	}
	docid, err := docID("definition id", definitionID(tenantID, kind, id))
	if err != nil {
		return storedDefinition{}, err
	}
	ctx, cancel := s.withTimeout(ctx)
	defer cancel()
	resp, err := s.api.Document.Get(ctx, opensearchapi.DocumentGetReq{Index: s.names.definitions, DocumentID: docid})
	if status(resp.Inspect().Response) == http.StatusNotFound {
		return storedDefinition{}, fmt.Errorf("opensearch: %s %q: %w", kind, id, store.ErrNotFound)
	}
	if err := check(resp.Inspect().Response, err, fmt.Sprintf("get %s %q", kind, id)); err != nil {
		return storedDefinition{}, err
	}
	var cur storedDefinition
	if err := json.Unmarshal(resp.Source, &cur.def); err != nil {
		return storedDefinition{}, fmt.Errorf("opensearch: decode %s %q: %w", kind, id, err)
	}
	cur.seq, cur.term = resp.SeqNo, resp.PrimaryTerm
	return cur, nil
}

// ListDefinitions returns the tenant's definitions of kind ordered by id,
// at most store.MaxListDefinitions of them.
func (s *Store) ListDefinitions(ctx context.Context, tenantID, kind string) ([]store.Definition, error) {
	if tenantID == "" || kind == "" {
		return nil, fmt.Errorf("opensearch: definitions need a tenant and a kind: %w", store.ErrInvalidArgument)
	}
	ctx, cancel := s.withTimeout(ctx)
	defer cancel()
	body := obj{
		"size":  store.MaxListDefinitions,
		"query": obj{"bool": obj{"filter": []obj{term("tenant_id", tenantID), term("kind", kind)}}},
		"sort":  []obj{{"id": "asc"}},
	}
	resp, err := s.search(ctx, s.names.definitions, body, opensearchapi.SearchParams{})
	if err != nil {
		return nil, err
	}
	out := make([]store.Definition, 0, len(resp.Hits.Hits))
	for _, h := range resp.Hits.Hits {
		var d store.Definition
		if err := json.Unmarshal(h.Source, &d); err != nil {
			return nil, fmt.Errorf("opensearch: decode %s %q: %w", kind, h.ID, err)
		}
		out = append(out, d)
	}
	return out, nil
}

// DeleteDefinition deletes the definition (tenantID, kind, id): with
// expected 0 whatever its version, otherwise only if its version is
// expected (else store.ErrConflict). A missing definition is
// store.ErrNotFound.
func (s *Store) DeleteDefinition(ctx context.Context, tenantID, kind, id string, expected int64) error {
	cur, err := s.getDefinition(ctx, tenantID, kind, id)
	if err != nil {
		return err
	}
	if expected != 0 && cur.def.Version != expected {
		return fmt.Errorf("opensearch: %s %q: stored version %d, expected %d: %w", kind, id, cur.def.Version, expected, store.ErrConflict)
	}
	ctx, cancel := s.withTimeout(ctx)
	defer cancel()
	resp, err := s.api.Document.Delete(ctx, opensearchapi.DocumentDeleteReq{Index: s.names.definitions,
		DocumentID: definitionID(tenantID, kind, id),
		Params:     opensearchapi.DocumentDeleteParams{Refresh: refreshWaitFor, IfSeqNo: &cur.seq, IfPrimaryTerm: &cur.term}})
	switch status(resp.Inspect().Response) {
	case http.StatusConflict:
		return fmt.Errorf("opensearch: %s %q: %w", kind, id, store.ErrConflict)
	case http.StatusNotFound:
		return fmt.Errorf("opensearch: %s %q: %w", kind, id, store.ErrNotFound)
	}
	return check(resp.Inspect().Response, err, fmt.Sprintf("delete %s %q", kind, id))
}
