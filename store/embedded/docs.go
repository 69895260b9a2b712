package embedded

import (
	"context"
	"fmt"
	"slices"

	json "github.com/go-json-experiment/json/v1"

	"github.com/agentbus/agentbus/events"
	"github.com/agentbus/agentbus/store"
)

// soulKey is the KV key of the soul of (tenantID, userID).
func soulKey(tenantID, userID string) string {
	return escape(tenantID) + "." + optionalToken(userID)
}

// PutSoul validates soul and stores it under (soul.TenantID, soul.UserID),
// replacing any previous one.
func (s *Store) PutSoul(ctx context.Context, soul store.Soul) error {
	data, err := store.Encode(store.IndexSouls, soul)
	if err != nil {
		return fmt.Errorf("embedded: encode soul %q: %w", soul.ID, err)
	}
	if _, err := s.souls.Put(ctx, soulKey(soul.TenantID, soul.UserID), data); err != nil {
		return fmt.Errorf("embedded: put soul %q: %w", soul.ID, err)
	}
	return nil
}

// GetSoul returns the soul of (tenantID, userID); userID may be empty for
// the tenant-wide soul. It returns store.ErrNotFound if there is none.
func (s *Store) GetSoul(ctx context.Context, tenantID, userID string) (store.Soul, error) {
	if tenantID == "" {
		return store.Soul{}, fmt.Errorf("embedded: soul without tenant: %w", store.ErrInvalidArgument)
	}
	e, err := getEntry(ctx, s.souls, soulKey(tenantID, userID), fmt.Sprintf("soul %q/%q", tenantID, userID))
	if err != nil {
		return store.Soul{}, err
	}
	var soul store.Soul
	if err := json.Unmarshal(e.Value(), &soul); err != nil {
		return store.Soul{}, fmt.Errorf("embedded: decode soul %s: %w", e.Key(), err)
	}
	return soul, nil
}

// SoulFor returns the soul a run of userID sees: the user's own, else the
// tenant's (userID "" asks for the tenant's), both read with one request;
// store.ErrNotFound when there is neither.
func (s *Store) SoulFor(ctx context.Context, tenantID, userID string) (store.Soul, error) {
	if tenantID == "" {
		return store.Soul{}, fmt.Errorf("embedded: soul without tenant: %w", store.ErrInvalidArgument)
	}
	keys := []string{soulKey(tenantID, userID)}
	if userID != "" {
		keys = append(keys, soulKey(tenantID, ""))
	}
	vals, err := events.LastValues(ctx, s.js, s.souls.Bucket(), keys)
	if err != nil {
		return store.Soul{}, fmt.Errorf("embedded: get soul %q/%q: %w", tenantID, userID, err)
	}
	for _, k := range keys {
		if b, ok := vals[k]; ok {
			var soul store.Soul
			if err := json.Unmarshal(b, &soul); err != nil {
				return store.Soul{}, fmt.Errorf("embedded: decode soul %s: %w", k, err)
			}
			return soul, nil
		}
	}
	return store.Soul{}, fmt.Errorf("embedded: soul %q/%q: %w", tenantID, userID, store.ErrNotFound)
}

// sessionKey is the KV key of a session: session ids are unique within a
// tenant only.
func sessionKey(tenantID, sessionID string) string {
	return escape(tenantID) + "." + escape(sessionID)
}

// PutSession validates sess and stores it under (sess.TenantID,
// sess.SessionID), replacing any previous one.
func (s *Store) PutSession(ctx context.Context, sess store.Session) error {
	data, err := store.Encode(store.IndexSessions, sess)
	if err != nil {
		return fmt.Errorf("embedded: encode session %q: %w", sess.SessionID, err)
	}
	if _, err := s.sessions.Put(ctx, sessionKey(sess.TenantID, sess.SessionID), data); err != nil {
		return fmt.Errorf("embedded: put session %q: %w", sess.SessionID, err)
	}
	return nil
}

// GetSession returns the session sessionID of tenantID, or
// store.ErrNotFound.
func (s *Store) GetSession(ctx context.Context, tenantID, sessionID string) (store.Session, error) {
	if tenantID == "" || sessionID == "" {
		return store.Session{}, fmt.Errorf("embedded: session needs a tenant and an id: %w", store.ErrInvalidArgument)
	}
	e, err := getEntry(ctx, s.sessions, sessionKey(tenantID, sessionID), fmt.Sprintf("session %q", sessionID))
	if err != nil {
		return store.Session{}, err
	}
	var sess store.Session
	if err := json.Unmarshal(e.Value(), &sess); err != nil {
		return store.Session{}, fmt.Errorf("embedded: decode session %s: %w", e.Key(), err)
	}
	return sess, nil
}

// ListSessions returns the tenant's sessions q selects, newest first, as
// store.SessionQuery specifies.
func (s *Store) ListSessions(ctx context.Context, q store.SessionQuery) ([]store.Session, error) {
	if q.TenantID == "" {
		return nil, fmt.Errorf("embedded: sessions need a tenant: %w", store.ErrInvalidArgument)
	}
	out, err := list(ctx, s.sessions, escape(q.TenantID)+".*", "sessions", q.Match)
	if err != nil {
		return nil, err
	}
	slices.SortFunc(out, store.CompareSessionsNewestFirst)
	return out[:min(len(out), q.EffectiveLimit())], nil
}
