package demo

import (
	"reflect"
	"testing"

	json "github.com/go-json-experiment/json/v1"
	mcpclient "github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/agentbus/agentbus/skills"
)

// rawClient is a stock mcp-go client, initialized, for tenant's catalog.
func rawClient(t *testing.T, env *testEnv, tenant string) *mcpclient.Client {
	t.Helper()
	c, err := mcpclient.NewStreamableHttpClient(env.srv.URL + "/tenants/" + tenant + "/mcp")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	ctx := testCtx(t)
	if err := c.Start(ctx); err != nil {
		t.Fatal(err)
	}
	init := mcp.InitializeRequest{}
	init.Params.ClientInfo = mcp.Implementation{Name: "test", Version: "0"}
	if _, err := c.Initialize(ctx, init); err != nil {
		t.Fatal(err)
	}
	return c
}

// TestManifestAnnotationsMatchToolsList: load_skill's manifest of every
// skill carries the annotations of its tools/list entry.
func TestManifestAnnotationsMatchToolsList(t *testing.T) {
	env := newTestEnv(t, Config{}, skills.Config{}, nil)
	c := rawClient(t, env, "acme")
	ctx := testCtx(t)
	res, err := c.ListTools(ctx, mcp.ListToolsRequest{})
	if err != nil {
		t.Fatal(err)
	}
	for _, tool := range res.Tools {
		want := mcp.ToolAnnotation{ReadOnlyHint: mcp.ToBoolPtr(true), DestructiveHint: mcp.ToBoolPtr(false),
			IdempotentHint: mcp.ToBoolPtr(true), OpenWorldHint: mcp.ToBoolPtr(false)}
		if !reflect.DeepEqual(tool.Annotations, want) {
			t.Fatalf("%s: tools/list annotations %+v", tool.Name, tool.Annotations)
		}
		if tool.Name == skills.ToolFindRelevantSkills || tool.Name == skills.ToolLoadSkill {
			continue
		}
		req := mcp.CallToolRequest{}
		req.Params.Name = skills.ToolLoadSkill
		req.Params.Arguments = map[string]any{"name": tool.Name}
		out, err := c.CallTool(ctx, req)
		if err != nil || out.IsError {
			t.Fatalf("load_skill(%s) = %+v, %v", tool.Name, out, err)
		}
		var m struct {
			Annotations mcp.ToolAnnotation `json:"annotations"`
		}
		text, _ := mcp.AsTextContent(out.Content[0])
		if err := json.Unmarshal([]byte(text.Text), &m); err != nil || !reflect.DeepEqual(m.Annotations, tool.Annotations) {
			t.Fatalf("load_skill(%s) annotations %+v (%v), tools/list %+v", tool.Name, m.Annotations, err, tool.Annotations)
		}
	}
}

// TestDenySkills: a skill in Config.DenySkills answers a "permission
// denied" tool error, is counted by Calls and never executes.
func TestDenySkills(t *testing.T) {
	env := newTestEnv(t, Config{DenySkills: []string{SkillOutletList}}, skills.Config{}, nil)
	c := rawClient(t, env, "beta")
	ctx := testCtx(t)
	call := func(name string) *mcp.CallToolResult {
		t.Helper()
		req := mcp.CallToolRequest{}
		req.Params.Name = name
		req.Params.Meta = &mcp.Meta{AdditionalFields: map[string]any{skills.MetaIdempotencyKey: "key-" + name}}
		res, err := c.CallTool(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	res := call(SkillOutletList)
	text, _ := mcp.AsTextContent(res.Content[0])
	if !res.IsError || text.Text != skills.PermissionDeniedMessage+": "+SkillOutletList {
		t.Fatalf("denied call = %+v", res)
	}
	if n, inv := env.svc.Calls(SkillOutletList), env.svc.Invocations(); n != 1 || inv["key-"+SkillOutletList] != 0 {
		t.Fatalf("denied call: Calls = %d, Invocations = %v", n, inv)
	}
	if res := call(SkillMenuCatalog); res.IsError {
		t.Fatalf("menu_catalog = %+v", res)
	}
}
