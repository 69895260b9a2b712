package opensearch

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"

	json "github.com/go-json-experiment/json/v1"
	"github.com/opensearch-project/opensearch-go/v4/opensearchapi"

	"github.com/agentbus/agentbus/store"
)

// soulID is the document id of the soul of (tenantID, userID). The tenant
// is length-prefixed, so ("a:b", "c") and ("a", "b:c") differ, and an
// empty user (the tenant-wide soul) is its own id.
func soulID(tenantID, userID string) string {
	return strconv.Itoa(len(tenantID)) + ":" + tenantID + ":" + userID
}

// PutSoul validates soul and stores it under (soul.TenantID, soul.UserID),
// replacing any previous one.
func (s *Store) PutSoul(ctx context.Context, soul store.Soul) error {
	if err := store.Validate(store.IndexSouls, soul); err != nil {
		return err
	}
	return s.putDoc(ctx, s.names.souls, "soul", soulID(soul.TenantID, soul.UserID), soul)
}

// GetSoul returns the soul of (tenantID, userID); userID may be empty for
// the tenant-wide soul. It returns store.ErrNotFound if there is none.
func (s *Store) GetSoul(ctx context.Context, tenantID, userID string) (store.Soul, error) {
	if tenantID == "" {
		return store.Soul{}, fmt.Errorf("opensearch: soul without tenant: %w", store.ErrInvalidArgument)
	}
	var soul store.Soul
	err := s.getDoc(ctx, s.names.souls, "soul", soulID(tenantID, userID), &soul)
	return soul, err
}

// SoulFor returns the soul a run of userID sees: the user's own, else the
// tenant's (userID "" asks for the tenant's); store.ErrNotFound when
// there is neither. Both are read at once.
func (s *Store) SoulFor(ctx context.Context, tenantID, userID string) (store.Soul, error) {
	if userID == "" {
		return s.GetSoul(ctx, tenantID, "")
	}
	var tenant store.Soul
	var tenantErr error
	done := make(chan struct{})
	go func() {
		defer close(done)
		tenant, tenantErr = s.GetSoul(ctx, tenantID, "")
	}()
	own, err := s.GetSoul(ctx, tenantID, userID)
	<-done
	if errors.Is(err, store.ErrNotFound) {
		return tenant, tenantErr
	}
	return own, err
}

// sessionID is the document id of a session: session ids are unique
// within a tenant only, so the id is length-prefixed by the tenant like
// soulID.
func sessionID(tenantID, sessionID string) string {
	return strconv.Itoa(len(tenantID)) + ":" + tenantID + ":" + sessionID
}

// PutSession validates sess and stores it under (sess.TenantID,
// sess.SessionID), replacing any previous one.
func (s *Store) PutSession(ctx context.Context, sess store.Session) error {
	if err := store.Validate(store.IndexSessions, sess); err != nil {
		return err
	}
	return s.putDoc(ctx, s.names.sessions, "session", sessionID(sess.TenantID, sess.SessionID), sess)
}

// GetSession returns the session id of tenantID, or store.ErrNotFound.
func (s *Store) GetSession(ctx context.Context, tenantID, id string) (store.Session, error) {
	if tenantID == "" || id == "" {
		return store.Session{}, fmt.Errorf("opensearch: session needs a tenant and an id: %w", store.ErrInvalidArgument)
	}
	var sess store.Session
	err := s.getDoc(ctx, s.names.sessions, "session", sessionID(tenantID, id), &sess)
	return sess, err
}

// putDoc indexes an already validated doc under id. Souls and sessions
// are only read by id, which is real-time, so the write does not wait
// for a refresh.
func (s *Store) putDoc(ctx context.Context, index, what, id string, doc any) error {
	if _, err := docID(what+" id", id); err != nil {
		return err
	}
	data, err := json.Marshal(doc)
	if err != nil {
		return fmt.Errorf("opensearch: encode %s %q: %w", what, id, err)
	}
	ctx, cancel := s.withTimeout(ctx)
	defer cancel()
	resp, err := s.api.Index(ctx, opensearchapi.IndexReq{Index: index, DocumentID: id, Body: bytes.NewReader(data)})
	return check(resp.Inspect().Response, err, fmt.Sprintf("index %s %q", what, id))
}

// getDoc decodes the document id of index into dst, or returns
// store.ErrNotFound.
func (s *Store) getDoc(ctx context.Context, index, what, id string, dst any) error {
	if _, err := docID(what+" id", id); err != nil {
		return err
	}
	ctx, cancel := s.withTimeout(ctx)
	defer cancel()
	resp, err := s.api.Document.Get(ctx, opensearchapi.DocumentGetReq{Index: index, DocumentID: id})
	if status(resp.Inspect().Response) == http.StatusNotFound {
		return fmt.Errorf("opensearch: %s %q: %w", what, id, store.ErrNotFound)
	}
	if err := check(resp.Inspect().Response, err, fmt.Sprintf("get %s %q", what, id)); err != nil {
		return err
	}
	if err := json.Unmarshal(resp.Source, dst); err != nil {
		return fmt.Errorf("opensearch: decode %s %q: %w", what, id, err)
	}
	return nil
}

// ListSessions returns the tenant's sessions q selects, newest first, as
// store.SessionQuery specifies. Session writes do not wait for a
// refresh (the sessions bucket is the authority; this index is its
// projection), so a session shows in the list within the index's refresh
// interval.
func (s *Store) ListSessions(ctx context.Context, q store.SessionQuery) ([]store.Session, error) {
	if q.TenantID == "" {
		return nil, fmt.Errorf("opensearch: sessions need a tenant: %w", store.ErrInvalidArgument)
	}
	filter := []obj{term("tenant_id", q.TenantID)}
	if q.Status != "" {
		filter = append(filter, term("state", q.Status))
	}
	if q.AgentID != "" {
		filter = append(filter, term("agent_id", q.AgentID))
	}
	if q.UserID != "" {
		filter = append(filter, term("user_id", q.UserID))
	}
	ctx, cancel := s.withTimeout(ctx)
	defer cancel()
	body := obj{
		"size":  q.EffectiveLimit(),
		"query": obj{"bool": obj{"filter": filter}},
		"sort":  []obj{{"started_at": obj{"order": "desc", "missing": "_last"}}, {"session_id": "asc"}},
	}
	resp, err := s.search(ctx, s.names.sessions, body, opensearchapi.SearchParams{})
	if err != nil {
		return nil, err
	}
	out := make([]store.Session, 0, len(resp.Hits.Hits))
	for _, h := range resp.Hits.Hits {
		var sess store.Session
		if err := json.Unmarshal(h.Source, &sess); err != nil {
			return nil, fmt.Errorf("opensearch: decode session %q: %w", h.ID, err)
		}
		out = append(out, sess)
	}
	return out, nil
}
