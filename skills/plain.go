package skills

import (
	"context"
	"fmt"
	"strings"
	"time"

	json "github.com/go-json-experiment/json/v1"
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/agentbus/agentbus/text"
)

// TextOutputField is the field under which plain mode returns the text of
// a tool that declares no output schema: Call yields {"text": "..."}.
const TextOutputField = "text"

// AttachmentsOutputField is the field under which Call describes a
// result's non-text items (see Attachment).
const AttachmentsOutputField = "attachments"

// TextOutputSchema is the OutputSchema plain mode gives a tool that
// declares none: an object holding the tool's text content under
// TextOutputField and its attachments under AttachmentsOutputField. (A
// bare {"type":"object"} would describe no field, so a plan could neither
// chain nor project anything from the tool.)
var TextOutputSchema = json.RawMessage(`{"type":"object","properties":{"text":{"type":"string",` +
	`"description":"The text content of the tool result"},"attachments":{"type":"array",` +
	`"description":"The images, audio and resources of the tool result, stored by reference",` +
	`"items":{"type":"object","properties":{"kind":{"type":"string"},"mime_type":{"type":"string"},` +
	`"uri":{"type":"string"},"size":{"type":"integer"},"sha256":{"type":"string"},"ref":{"type":"string"}}}}},` +
	`"required":["text"]}`)

// textOutput is a plain result of a tool that declares no output schema.
type textOutput struct {
	Text        string       `json:"text"`
	Attachments []Attachment `json:"attachments,omitempty"`
}

// mode returns how the tenant's server is used and, unless that is the
// configured ModeSkillService, the server's tools.
func (c *Client) mode(ctx context.Context, tenant string) (string, []mcp.Tool, error) {
	if c.cfg.Mode == ModeSkillService {
		if !ValidTenant(tenant) {
			return "", nil, ErrInvalidTenant
		}
		return ModeSkillService, nil, nil
	}
	tools, _, err := c.listTools(ctx, tenant, false)
	if err != nil {
		return "", nil, err
	}
	if c.cfg.Mode == ModeAuto && isSkillService(tools) {
		return ModeSkillService, tools, nil
	}
	return ModePlain, tools, nil
}

// Tools returns the names of the tools the tenant's server lists
// (tools/list, cached for Config.ToolsTTL).
func (c *Client) Tools(ctx context.Context, tenant string) ([]string, error) {
	ctx, cancel := context.WithTimeout(ctx, c.cfg.Timeout)
	defer cancel()
	tools, _, err := c.listTools(ctx, tenant, false)
	if err != nil {
		return nil, c.redact(ctx, fmt.Errorf("skills: tools/list for tenant %q: %w", tenant, err))
	}
	names := make([]string, len(tools))
	for i, t := range tools {
		names[i] = t.Name
	}
	return names, nil
}

// isSkillService reports whether tools hold both discovery tools.
func isSkillService(tools []mcp.Tool) bool {
	var find, load bool
	for _, t := range tools {
		find = find || t.Name == ToolFindRelevantSkills
		load = load || t.Name == ToolLoadSkill
	}
	return find && load
}

// listTools returns the tools/list of the tenant's server, from the
// connection's cache while it is younger than Config.ToolsTTL unless
// refresh is set. fetched reports a list fetched by this call. The cache
// is per API key, as a server may scope its tools by key.
func (c *Client) listTools(ctx context.Context, tenant string, refresh bool) (tools []mcp.Tool, fetched bool, err error) {
	id := keyID(c.apiKey(ctx))
	err = c.withConn(ctx, tenant, func(ctx context.Context, cn *conn) error {
		cn.mu.Lock()
		cached, ok := cn.tools[id]
		cn.mu.Unlock()
		if ok && !refresh && time.Since(cached.at) < c.cfg.ToolsTTL {
			tools, fetched = cached.tools, false
			return nil
		}
		res, err := cn.mc.ListTools(ctx, mcp.ListToolsRequest{})
		if err != nil {
			return err
		}
		cn.mu.Lock()
		cn.tools[id] = toolList{tools: res.Tools, at: time.Now()}
		cn.mu.Unlock()
		tools, fetched = res.Tools, true
		return nil
	})
	return tools, fetched, err
}

// tool returns the tool called name: from tools, or from a fresh list when
// tools came from the cache and lack it (the server may have added it).
func (c *Client) tool(ctx context.Context, tenant string, tools []mcp.Tool, name string) (mcp.Tool, error) {
	if t, ok := findTool(tools, name); ok {
		return t, nil
	}
	fresh, _, err := c.listTools(ctx, tenant, true)
	if err != nil {
		return mcp.Tool{}, err
	}
	if t, ok := findTool(fresh, name); ok {
		return t, nil
	}
	return mcp.Tool{}, fmt.Errorf("%w: %q", ErrSkillNotFound, name)
}

func findTool(tools []mcp.Tool, name string) (mcp.Tool, bool) {
	for _, t := range tools {
		if t.Name == name && !isDiscoveryTool(name) {
			return t, true
		}
	}
	return mcp.Tool{}, false
}

func isDiscoveryTool(name string) bool {
	return name == ToolFindRelevantSkills || name == ToolLoadSkill
}

// toolDescription is what plain mode shows of a tool: its description, or
// its title when it has none.
func toolDescription(t mcp.Tool) string {
	if d := strings.TrimSpace(t.Description); d != "" {
		return d
	}
	if t.Title != "" {
		return t.Title
	}
	return t.Annotations.Title
}

// rankTools ranks tools against query with Rank, as the demo Skill
// Service ranks its catalog, best first, at most limit of them
// (DefaultFindLimit when limit <= 0, never more than MaxFindLimit).
func rankTools(query string, tools []mcp.Tool, limit int) []Summary {
	if limit <= 0 {
		limit = DefaultFindLimit
	}
	limit = min(limit, MaxFindLimit)
	items := make([]Summary, 0, len(tools))
	for _, t := range tools {
		if isDiscoveryTool(t.Name) {
			continue
		}
		items = append(items, Summary{Name: t.Name, Description: toolDescription(t), Keywords: toolKeywords(t)})
	}
	ranked := Rank(query, items)
	if len(ranked) > limit {
		ranked = ranked[:limit]
	}
	return ranked
}

// toolKeywords are the words of a tool's input schema, and of its output
// schema when it declares one, for Rank.
func toolKeywords(t mcp.Tool) string {
	var words []string
	if in, err := inputSchema(t); err == nil {
		words = append(words, text.SchemaWords(in))
	}
	if len(t.RawOutputSchema) > 0 || t.OutputSchema.Type != "" {
		if out, err := outputSchema(t); err == nil {
			words = append(words, text.SchemaWords(out))
		}
	}
	return strings.Join(words, " ")
}

// toolManifest builds the Manifest of a plain MCP tool: its input schema,
// its declared output schema or else TextOutputSchema, the sync execution
// mode (the result comes back in the tools/call response) and the hints of
// its annotations.
func toolManifest(t mcp.Tool) (Manifest, error) {
	in, err := inputSchema(t)
	if err != nil {
		return Manifest{}, err
	}
	out, err := outputSchema(t)
	if err != nil {
		return Manifest{}, err
	}
	return Manifest{
		Name:          t.Name,
		Description:   toolDescription(t),
		InputSchema:   in,
		OutputSchema:  out,
		ExecutionMode: ExecutionModeSync,
		Annotations:   annotationsOf(t.Annotations),
	}, nil
}

// annotationsOf copies the hints a tool's annotations set, nil when they
// set none. The copies do not alias the cached tools/list.
func annotationsOf(ta mcp.ToolAnnotation) *Annotations {
	a := Annotations{
		ReadOnlyHint:    copyBool(ta.ReadOnlyHint),
		DestructiveHint: copyBool(ta.DestructiveHint),
		IdempotentHint:  copyBool(ta.IdempotentHint),
		OpenWorldHint:   copyBool(ta.OpenWorldHint),
	}
	if a == (Annotations{}) {
		return nil
	}
	return &a
}

func copyBool(b *bool) *bool {
	if b == nil {
		return nil
	}
	v := *b
	return &v
}

func inputSchema(t mcp.Tool) (json.RawMessage, error) {
	if len(t.RawInputSchema) > 0 {
		return json.RawMessage(t.RawInputSchema), nil
	}
	s := t.InputSchema
	if s.Type == "" {
		s.Type = "object"
	}
	b, err := json.Marshal(s)
	if err != nil {
		return nil, fmt.Errorf("%w: input schema of %q: %v", ErrInvalidResponse, t.Name, err)
	}
	return b, nil
}

// declaresOutput reports whether t has an output schema of its own.
func declaresOutput(t mcp.Tool) bool {
	return len(t.RawOutputSchema) > 0 || t.OutputSchema.Type != ""
}

func outputSchema(t mcp.Tool) (json.RawMessage, error) {
	if len(t.RawOutputSchema) > 0 {
		return json.RawMessage(t.RawOutputSchema), nil
	}
	if t.OutputSchema.Type == "" {
		return TextOutputSchema, nil
	}
	b, err := json.Marshal(t.OutputSchema)
	if err != nil {
		return nil, fmt.Errorf("%w: output schema of %q: %v", ErrInvalidResponse, t.Name, err)
	}
	return b, nil
}

// plainResult turns a plain tool's result into a JSON object matching its
// Manifest's OutputSchema: the structured content (or a JSON object text)
// of a tool that declares an output schema, else a textOutput of its text
// content (or structured content) and its attachments.
func (c *Client) plainResult(ctx context.Context, tenant string, t mcp.Tool, r *mcp.CallToolResult) ([]byte, error) {
	if declaresOutput(t) {
		out, err := declaredResult(t, r)
		if err != nil {
			return nil, err
		}
		if err := c.checkSize("result", len(out)); err != nil {
			return nil, err
		}
		return out, nil
	}
	texts := textItems(r)
	if len(texts) == 0 && r.StructuredContent != nil {
		b, err := json.Marshal(r.StructuredContent)
		if err != nil {
			return nil, fmt.Errorf("%w: %v", ErrInvalidResponse, err)
		}
		texts = []string{string(b)}
	}
	out := textOutput{Text: strings.Join(texts, "\n")}
	if err := c.checkSize("text", len(out.Text)); err != nil {
		return nil, err
	}
	atts, err := c.attachments(ctx, tenant, r)
	if err != nil {
		return nil, err
	}
	if len(texts) == 0 && len(atts) == 0 {
		return nil, fmt.Errorf("%w: result has no content", ErrInvalidResponse)
	}
	out.Attachments = atts
	return json.Marshal(out)
}

// declaredResult is the result of a tool that declares an output schema:
// its structured content, or its text content when that is a JSON object.
func declaredResult(t mcp.Tool, r *mcp.CallToolResult) ([]byte, error) {
	if r.StructuredContent != nil {
		b, err := json.Marshal(r.StructuredContent)
		if err == nil && len(b) > 0 && b[0] == '{' {
			return b, nil
		}
	}
	text := strings.TrimSpace(strings.Join(textItems(r), ""))
	if strings.HasPrefix(text, "{") && json.Valid([]byte(text)) {
		return []byte(text), nil
	}
	return nil, fmt.Errorf("%w: %q declares an output schema but returned no JSON object", ErrBrokenContract, t.Name)
}

// textItems returns the text content items of r.
func textItems(r *mcp.CallToolResult) []string {
	var out []string
	for _, content := range r.Content {
		if tc, ok := mcp.AsTextContent(content); ok {
			out = append(out, tc.Text)
		}
	}
	return out
}
