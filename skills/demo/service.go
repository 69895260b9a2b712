package demo

import (
	"context"
	stdjson "encoding/json"
	"fmt"
	"log/slog"
	"maps"
	"net/http"
	"slices"
	"sync"
	"time"

	json "github.com/go-json-experiment/json/v1"
	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/agentbus/agentbus/skills"
)

// InjectedFailureMessage is the tool error returned by calls that
// Config.FailFirst makes fail.
const InjectedFailureMessage = "transient failure (injected)"

// Demo Skill Service identity reported to MCP clients.
const (
	serverName    = "agentbus-demo-skills"
	serverVersion = "1.0.0"
)

// Config configures a Service. The zero value is usable.
type Config struct {
	// FailFirst maps a skill name to the number of its initial calls (counted
	// globally per skill) that fail with the tool error
	// "transient failure (injected)". Default empty.
	FailFirst map[string]int
	// Latency is slept at the start of every skill call. Default 0.
	Latency time.Duration
	// HangFirst maps a skill name to the number of its initial calls that
	// never answer: each waits until its caller gives up. Default empty.
	HangFirst map[string]int
	// DenySkills names skills whose every call, by any tenant that can see
	// the skill, answers the tool error "permission denied: <skill>"
	// (skills.PermissionDeniedMessage), as a Skill Service refusing the
	// caller would; a skills.Client reports it as
	// skills.ErrPermissionDenied. A denied call is counted by Calls but
	// neither executed nor recorded under its idempotency key. Default
	// empty.
	DenySkills []string
	// Hints replaces the behaviour hints of the named skills (both
	// tools/list and load_skill serve them), so a test can declare a skill
	// destructive, mutating or open-world. Default: every skill read-only
	// and closed-world.
	Hints map[string]*skills.Annotations
}

// Service is a demo Skill Service: a tenant-scoped skill catalog served
// over MCP streamable HTTP at /tenants/{tenant}/mcp, over SSE at
// /tenants/{tenant}/sse and, one tenant per stream, over stdio
// (ServeStdio). It records every skill invocation for fault-injection
// tests. A Service is safe for concurrent use.
type Service struct {
	cfg     Config
	byName  map[string]*catalogSkill
	names   []string // sorted skill names
	handler http.Handler
	mcpSrv  *server.MCPServer // the catalog's MCP server, behind every transport

	mu          sync.Mutex
	invocations map[string]int        // idempotency key -> executions (side effects)
	calls       map[string]int        // skill name -> executions
	replays     map[string]int        // idempotency key -> calls answered from the record
	hung        map[string]int        // skill name -> calls left hanging
	waiting     map[string]int        // skill name -> calls now in their latency or hang
	abandoned   map[string]int        // skill name -> calls given up before their effect
	results     map[string]*keyedCall // idempotency key -> its one execution
}

// keyedCall is the single execution of one idempotency key: later calls
// with the key wait for it and get its result.
type keyedCall struct {
	done chan struct{}
	res  *mcp.CallToolResult
}

// catalogSkill is one catalog entry.
type catalogSkill struct {
	name        string
	description string
	owner       string // tenant owning a private skill; "" for public skills
	input       json.RawMessage
	output      json.RawMessage
	run         func(ctx context.Context, args json.RawMessage) (any, error)
	hints       *skills.Annotations // its behaviour hints, as tools/list and load_skill give them
}

// visibleTo reports whether tenant may see and call the skill.
func (d *catalogSkill) visibleTo(tenant string) bool {
	return d.owner == "" || d.owner == tenant
}

// manifest returns the skill's Manifest, annotated as its tools/list
// entry is.
func (d *catalogSkill) manifest() skills.Manifest {
	return skills.Manifest{
		Name:          d.name,
		Description:   d.description,
		InputSchema:   d.input,
		OutputSchema:  d.output,
		ExecutionMode: skills.ExecutionModeSync,
		Annotations:   d.hints,
	}
}

// NewService builds a Service with the fixed demo catalog.
func NewService(cfg Config) *Service {
	cfg.FailFirst, cfg.HangFirst = maps.Clone(cfg.FailFirst), maps.Clone(cfg.HangFirst)
	cfg.DenySkills = slices.Clone(cfg.DenySkills)
	if cfg.FailFirst == nil {
		cfg.FailFirst = map[string]int{}
	}
	s := &Service{
		cfg:         cfg,
		byName:      make(map[string]*catalogSkill),
		invocations: make(map[string]int),
		calls:       make(map[string]int),
		replays:     make(map[string]int),
		hung:        make(map[string]int),
		waiting:     make(map[string]int),
		abandoned:   make(map[string]int),
		results:     make(map[string]*keyedCall),
	}
	for _, sk := range allSkills() {
		sk.hints = toolHints()
		if h, ok := cfg.Hints[sk.name]; ok {
			sk.hints = h
		}
		s.byName[sk.name] = sk
		s.names = append(s.names, sk.name)
	}
	slices.Sort(s.names)

	mcpServer := server.NewMCPServer(serverName, serverVersion,
		server.WithToolCapabilities(false),
		server.WithToolFilter(s.filterTools),
		server.WithRecovery(),
	)
	mcpServer.AddTool(discoveryTool(skills.ToolFindRelevantSkills,
		"Find the skills most relevant to a natural-language query, best first", findInputSchema), s.handleFind)
	mcpServer.AddTool(discoveryTool(skills.ToolLoadSkill,
		"Load the full manifest (input/output schema, execution mode) of a skill", loadInputSchema), s.handleLoad)
	for _, name := range s.names {
		sk := s.byName[name]
		mcpServer.AddTool(mcp.Tool{
			Name:           sk.name,
			Description:    sk.description,
			RawInputSchema: stdjson.RawMessage(sk.input),
			Annotations:    toolAnnotation(sk.hints),
		}, s.skillHandler(sk))
	}
	streamable := server.NewStreamableHTTPServer(mcpServer,
		server.WithStateLess(true),
		server.WithStreamableHTTPLogger(slog.New(slog.DiscardHandler)),
	)

	mux := http.NewServeMux()
	mux.Handle("/tenants/{tenant}/mcp", tenantScope(streamable))
	mountSSE(mux, mcpServer)
	mux.HandleFunc("GET /invocations", s.serveInvocations)
	s.handler = mux
	s.mcpSrv = mcpServer
	return s
}

// Handler returns the HTTP handler serving MCP streamable HTTP at
// /tenants/{tenant}/mcp, MCP over SSE at /tenants/{tenant}/sse (messages
// at /tenants/{tenant}/message) and the executions and replays per
// idempotency key at GET /invocations (an InvocationReport).
func (s *Service) Handler() http.Handler {
	return s.handler
}

// Invocations returns a snapshot of the number of skill executions (side
// effects) per idempotency key; calls without a key are counted under "".
// A repeated key is answered from the first execution's result and counted
// by Replays instead, as an idempotency-key API does.
func (s *Service) Invocations() map[string]int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return maps.Clone(s.invocations)
}

// Calls returns the number of calls of skill so far, failed ones included.
func (s *Service) Calls(skill string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.calls[skill]
}

// Replays returns how many calls per idempotency key were answered from
// the recorded result without executing the skill again.
func (s *Service) Replays() map[string]int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return maps.Clone(s.replays)
}

// Waiting returns the number of calls of skill now waiting out their
// Latency or hanging (Config.HangFirst): calls that reached the service
// and have not taken effect yet.
func (s *Service) Waiting(skill string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.waiting[skill]
}

// Abandoned returns the number of calls of skill whose caller gave up
// during their Latency or hang: they never took effect.
func (s *Service) Abandoned(skill string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.abandoned[skill]
}

// record counts one execution of skill with key and returns the skill's
// execution number (1 for the first).
func (s *Service) record(skill, key string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.invocations[key]++
	s.calls[skill]++
	return s.calls[skill]
}

// denied reports whether Config.DenySkills refuses skill, counting the
// refused call.
func (s *Service) denied(skill string) bool {
	if !slices.Contains(s.cfg.DenySkills, skill) {
		return false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls[skill]++
	return true
}

// claim returns the execution already recorded for key, or registers the
// caller as its one executor (owner = true).
func (s *Service) claim(key string) (kc *keyedCall, owner bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if kc, ok := s.results[key]; ok {
		s.replays[key]++
		return kc, false
	}
	kc = &keyedCall{done: make(chan struct{})}
	s.results[key] = kc
	return kc, true
}

// abandon forgets an execution that ended before its side effect, so the
// next call with the key executes.
func (s *Service) abandon(key string, kc *keyedCall) {
	s.mu.Lock()
	delete(s.results, key)
	s.mu.Unlock()
	close(kc.done)
}

// InvocationReport is the body of GET /invocations: executions (side
// effects) and replays per idempotency key, as Invocations and Replays
// return them.
type InvocationReport struct {
	Executions map[string]int `json:"executions"`
	Replays    map[string]int `json:"replays"`
}

// serveInvocations answers GET /invocations with an InvocationReport, so a
// harness running the service as a separate process can check that no key
// was executed twice.
func (s *Service) serveInvocations(w http.ResponseWriter, _ *http.Request) {
	s.mu.Lock()
	rep := InvocationReport{Executions: maps.Clone(s.invocations), Replays: maps.Clone(s.replays)}
	s.mu.Unlock()
	body, err := json.Marshal(rep)
	if err != nil {
		http.Error(w, "encode invocations", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(body)
}

// tenantKey is the context key of the tenant a request is scoped to.
type tenantKey struct{}

// tenantScope validates the {tenant} path segment and stores it in the
// request context, where the tool filter and handlers read it.
func tenantScope(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		tenant := r.PathValue("tenant")
		if !skills.ValidTenant(tenant) {
			http.Error(w, "invalid tenant", http.StatusNotFound)
			return
		}
		next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), tenantKey{}, tenant)))
	})
}

// tenantFromContext returns the request's tenant, or "" when there is none;
// "" sees public skills only.
func tenantFromContext(ctx context.Context) string {
	tenant, _ := ctx.Value(tenantKey{}).(string)
	return tenant
}

// filterTools hides (and, since mcp-go applies filters on tools/call too,
// blocks) skills outside the request tenant's catalog.
func (s *Service) filterTools(ctx context.Context, tools []mcp.Tool) []mcp.Tool {
	tenant := tenantFromContext(ctx)
	out := make([]mcp.Tool, 0, len(tools))
	for _, tool := range tools {
		if tool.Name == skills.ToolFindRelevantSkills || tool.Name == skills.ToolLoadSkill {
			out = append(out, tool)
			continue
		}
		if sk, ok := s.byName[tool.Name]; ok && sk.visibleTo(tenant) {
			out = append(out, tool)
		}
	}
	return out
}

// catalog returns the skills visible to tenant, sorted by name.
func (s *Service) catalog(tenant string) []*catalogSkill {
	out := make([]*catalogSkill, 0, len(s.names))
	for _, name := range s.names {
		if sk := s.byName[name]; sk.visibleTo(tenant) {
			out = append(out, sk)
		}
	}
	return out
}

// skillHandler wraps a skill's implementation with scoping, denial,
// recording, latency and fault injection.
func (s *Service) skillHandler(sk *catalogSkill) server.ToolHandlerFunc {
	return func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		if !sk.visibleTo(tenantFromContext(ctx)) {
			return mcp.NewToolResultError(skills.NotFoundMessage + ": " + sk.name), nil
		}
		if s.denied(sk.name) {
			return mcp.NewToolResultError(skills.PermissionDeniedMessage + ": " + sk.name), nil
		}
		key := idempotencyKey(req)
		if key == "" {
			return s.execute(ctx, sk, req)
		}
		for {
			kc, owner := s.claim(key)
			if owner {
				res, err := s.execute(ctx, sk, req)
				if err != nil {
					s.abandon(key, kc)
					return nil, err
				}
				kc.res = res
				close(kc.done)
				return res, nil
			}
			select {
			case <-kc.done:
			case <-ctx.Done():
				return nil, ctx.Err()
			}
			if kc.res != nil {
				return kc.res, nil
			}
		}
	}
}

// execute runs the skill once: latency, fault injection, then the effect,
// which is recorded only when the call was not abandoned before it.
func (s *Service) execute(ctx context.Context, sk *catalogSkill, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	if err := s.delay(ctx, sk.name); err != nil {
		return nil, err
	}
	n := s.record(sk.name, idempotencyKey(req))
	if n <= s.cfg.FailFirst[sk.name] {
		return mcp.NewToolResultError(InjectedFailureMessage), nil
	}
	out, err := sk.run(ctx, rawArguments(req))
	if err != nil {
		return mcp.NewToolResultError(err.Error()), nil
	}
	return jsonResult(out)
}

// delay holds a call of skill for Config.Latency, or until its caller
// gives up when Config.HangFirst makes it hang; it returns the context's
// error when the caller gave up first.
func (s *Service) delay(ctx context.Context, skill string) error {
	s.mu.Lock()
	hang := s.hung[skill] < s.cfg.HangFirst[skill]
	if hang {
		s.hung[skill]++
	}
	if !hang && s.cfg.Latency <= 0 {
		s.mu.Unlock()
		return nil
	}
	s.waiting[skill]++
	s.mu.Unlock()
	var wait <-chan time.Time // nil when hanging: only the caller ends it
	if !hang {
		timer := time.NewTimer(s.cfg.Latency)
		defer timer.Stop()
		wait = timer.C
	}
	var err error
	select {
	case <-wait:
	case <-ctx.Done():
		err = ctx.Err()
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.waiting[skill]--
	if err != nil {
		s.abandoned[skill]++
	}
	return err
}

// handleFind implements find_relevant_skills over the request tenant's catalog.
func (s *Service) handleFind(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	var args struct {
		Query string `json:"query"`
		Limit int    `json:"limit"`
	}
	if err := json.Unmarshal(rawArguments(req), &args); err != nil {
		return mcp.NewToolResultError("invalid arguments: " + err.Error()), nil
	}
	if args.Limit <= 0 {
		args.Limit = skills.DefaultFindLimit
	}
	args.Limit = min(args.Limit, skills.MaxFindLimit)
	ranked := rankSkills(args.Query, s.catalog(tenantFromContext(ctx)))
	if len(ranked) > args.Limit {
		ranked = ranked[:args.Limit]
	}
	return jsonResult(map[string][]skills.Summary{"skills": ranked})
}

// handleLoad implements load_skill over the request tenant's catalog.
func (s *Service) handleLoad(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	var args struct {
		Name string `json:"name"`
	}
	if err := json.Unmarshal(rawArguments(req), &args); err != nil {
		return mcp.NewToolResultError("invalid arguments: " + err.Error()), nil
	}
	sk, ok := s.byName[args.Name]
	if !ok || !sk.visibleTo(tenantFromContext(ctx)) {
		return mcp.NewToolResultError(fmt.Sprintf("%s: %q", skills.NotFoundMessage, args.Name)), nil
	}
	return jsonResult(sk.manifest())
}

// discoveryTool declares a discovery tool with a raw input schema. (mcp.NewTool
// cannot be combined with mcp.WithRawInputSchema: NewTool presets a structured
// object schema, and Tool.MarshalJSON rejects a tool that has both.)
func discoveryTool(name, description string, input json.RawMessage) mcp.Tool {
	return mcp.Tool{
		Name:           name,
		Description:    description,
		RawInputSchema: stdjson.RawMessage(input),
		Annotations:    toolAnnotation(toolHints()),
	}
}

// idempotencyKey returns the string in the request's _meta idempotency_key
// field, or "".
func idempotencyKey(req mcp.CallToolRequest) string {
	key, _ := req.Params.Meta.GetMetaField(skills.MetaIdempotencyKey).(string)
	return key
}

// rawArguments returns the call's arguments as JSON, "{}" when absent.
func rawArguments(req mcp.CallToolRequest) json.RawMessage {
	var raw json.RawMessage
	switch v := req.GetRawArguments().(type) {
	case json.RawMessage:
		raw = v
	case nil:
	default:
		b, err := json.Marshal(v)
		if err != nil {
			return json.RawMessage("{}")
		}
		raw = b
	}
	if len(raw) == 0 || string(raw) == "null" {
		return json.RawMessage("{}")
	}
	return raw
}

// jsonResult encodes v as the single text content item of a tool result.
func jsonResult(v any) (*mcp.CallToolResult, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("demo: encode result: %w", err)
	}
	return mcp.NewToolResultText(string(b)), nil
}

// Input schemas of the discovery tools.
var (
	findInputSchema = json.RawMessage(`{"type":"object","properties":{` +
		`"query":{"type":"string","description":"What the skill should do, in natural language"},` +
		`"limit":{"type":"integer","minimum":1,"maximum":50,"description":"Maximum number of candidates (default 5)"}},` +
		`"required":["query"]}`)
	loadInputSchema = json.RawMessage(`{"type":"object","properties":{` +
		`"name":{"type":"string","description":"Skill name as returned by find_relevant_skills"}},` +
		`"required":["name"]}`)
)
