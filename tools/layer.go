package tools

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	json "github.com/go-json-experiment/json/v1"

	"github.com/agentbus/agentbus/agents"
	"github.com/agentbus/agentbus/skills"
	"github.com/agentbus/agentbus/store"
)

// Skills is the Skill Service client a Layer delegates to.
type Skills interface {
	Find(ctx context.Context, tenant, query string, limit int) ([]skills.Summary, error)
	Load(ctx context.Context, tenant, name string) (skills.Manifest, error)
	Call(ctx context.Context, tenant, name string, args json.RawMessage, idempotencyKey string) ([]byte, error)
}

// DefinitionLister lists a tenant's definitions of a kind (the store).
type DefinitionLister interface {
	ListDefinitions(ctx context.Context, tenantID, kind string) ([]store.Definition, error)
}

// DefaultCacheTTL is how long a Layer keeps a tenant's tool definitions:
// an edit reaches the runs within it.
const DefaultCacheTTL = 5 * time.Second

// Layer serves the system tools and the tenants' active webhook tools as
// skills and delegates every other name to Next: Find ranks them with
// Next's candidates, Load gives their manifests, Call runs them. A
// tenant's tool named like one of Next's skills is the tenant's.
type Layer struct {
	Next     Skills
	Defs     DefinitionLister
	System   *System   // nil serves no system tool
	Webhooks *Webhooks // nil serves no webhook tool
	CacheTTL time.Duration
	Now      func() time.Time

	mu    sync.Mutex
	cache map[string]cachedTools
}

type cachedTools struct {
	at    time.Time
	tools []agents.Tool
}

func (l *Layer) now() time.Time {
	if l.Now != nil {
		return l.Now()
	}
	return time.Now()
}

// tenantTools are the tenant's active custom tools, cached for CacheTTL.
func (l *Layer) tenantTools(ctx context.Context, tenant string) ([]agents.Tool, error) {
	if l.Webhooks == nil || l.Defs == nil {
		return nil, nil
	}
	ttl := cmp.Or(l.CacheTTL, DefaultCacheTTL)
	l.mu.Lock()
	c, ok := l.cache[tenant]
	l.mu.Unlock()
	if ok && l.now().Sub(c.at) < ttl {
		return c.tools, nil
	}
	defs, err := l.Defs.ListDefinitions(ctx, tenant, store.KindTool)
	if err != nil {
		return nil, fmt.Errorf("tools: list %s's tools: %w", tenant, err)
	}
	var list []agents.Tool
	for _, d := range defs {
		t, err := agents.ToolOf(d)
		if err != nil || t.Status != agents.StatusActive {
			continue // an unreadable or inactive tool is not offered
		}
		list = append(list, t)
	}
	l.mu.Lock()
	if l.cache == nil {
		l.cache = map[string]cachedTools{}
	}
	l.cache[tenant] = cachedTools{at: l.now(), tools: list}
	l.mu.Unlock()
	return list, nil
}

// own returns the tool named name this layer serves, if any.
func (l *Layer) own(ctx context.Context, tenant, name string) (agents.Tool, bool, error) {
	if l.System != nil && l.System.Serves(name) {
		t, _ := agents.SystemTool(name)
		return t, true, nil
	}
	list, err := l.tenantTools(ctx, tenant)
	if err != nil {
		return agents.Tool{}, false, fmt.Errorf("%w: %w", skills.ErrNotCalled, err)
	}
	i := slices.IndexFunc(list, func(t agents.Tool) bool { return t.Name == name })
	if i < 0 {
		return agents.Tool{}, false, nil
	}
	return list[i], true, nil
}

// Find ranks the layer's tools against query (skills.Rank) and merges
// them with Next's candidates, best first, at most limit.
func (l *Layer) Find(ctx context.Context, tenant, query string, limit int) ([]skills.Summary, error) {
	found, err := l.Next.Find(ctx, tenant, query, limit)
	if err != nil {
		return nil, err
	}
	var mine []skills.Summary
	if l.System != nil {
		for _, t := range agents.SystemTools {
			if l.System.Serves(t.Name) {
				mine = append(mine, skills.Summary{Name: t.Name, Description: t.Description})
			}
		}
	}
	list, err := l.tenantTools(ctx, tenant)
	if err != nil {
		return nil, err
	}
	for _, t := range list {
		mine = append(mine, skills.Summary{Name: t.Name, Description: t.Description})
	}
	ranked := skills.Rank(query, mine)
	out := slices.DeleteFunc(found, func(s skills.Summary) bool {
		return slices.ContainsFunc(ranked, func(r skills.Summary) bool { return r.Name == s.Name })
	})
	out = append(out, ranked...)
	slices.SortStableFunc(out, func(a, b skills.Summary) int { return cmp.Compare(b.Score, a.Score) })
	if limit <= 0 {
		limit = skills.DefaultFindLimit
	}
	if len(out) > limit {
		out = out[:limit]
	}
	return out, nil
}

// Load returns the manifest of one of the layer's tools, or Next's.
func (l *Layer) Load(ctx context.Context, tenant, name string) (skills.Manifest, error) {
	t, ok, err := l.own(ctx, tenant, name)
	if err != nil {
		return skills.Manifest{}, err
	}
	if !ok {
		return l.Next.Load(ctx, tenant, name)
	}
	return Manifest(t), nil
}

// Call runs one of the layer's tools, or calls Next's.
func (l *Layer) Call(ctx context.Context, tenant, name string, args json.RawMessage, key string) ([]byte, error) {
	t, ok, err := l.own(ctx, tenant, name)
	if err != nil {
		return nil, err
	}
	switch {
	case !ok:
		return l.Next.Call(ctx, tenant, name, args, key)
	case t.Type == agents.ToolTypeSystem:
		return l.System.Call(ctx, tenant, name, args, key)
	}
	return l.Webhooks.Call(ctx, tenant, t, args, key)
}

// Close closes Next when it can be.
func (l *Layer) Close() error {
	if c, ok := l.Next.(interface{ Close() error }); ok {
		return c.Close()
	}
	return nil
}

var objectSchema = json.RawMessage(`{"type":"object"}`)

// Manifest is a tool's skill manifest. Its annotations give its approval
// mode: get_context is read only; set_context and end_conversation write
// locally; send_message and webhook tools reach the open world (network);
// trigger_flow starts another run of the tenant's, acting for the user
// (delegated). Network and delegated calls are gated by default
// (runctl.DefaultGatedModes).
func Manifest(t agents.Tool) skills.Manifest {
	yes, no := true, false
	a := &skills.Annotations{ReadOnlyHint: &no, DestructiveHint: &no, OpenWorldHint: &yes}
	mode := ""
	switch t.Name {
	case agents.ToolTriggerFlow:
		mode = skills.ModeDelegated
	case agents.ToolGetContext:
		a.ReadOnlyHint, a.OpenWorldHint, a.IdempotentHint = &yes, &no, &yes
	case agents.ToolSetContext:
		a.OpenWorldHint, a.IdempotentHint = &no, &yes
	case agents.ToolEndConversation:
		a.OpenWorldHint = &no
	}
	if t.Type == agents.ToolTypeCustom {
		a.IdempotentHint = &t.Handler.Idempotent
	}
	return skills.Manifest{Name: t.Name, Description: t.Description, InputSchema: t.Parameters, OutputSchema: objectSchema,
		ExecutionMode: skills.ExecutionModeSync, Annotations: a, Mode: mode}
}
