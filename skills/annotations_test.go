package skills_test

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"reflect"
	"testing"

	json "github.com/go-json-experiment/json/v1"
	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/agentbus/agentbus/skills"
)

func ptr(b bool) *bool { return &b }

func TestManifestHints(t *testing.T) {
	cases := []struct {
		name                           string
		ann                            *skills.Annotations
		readOnly, destructive, openWld bool
	}{
		{"send_email", nil, false, false, true},
		{"send_email", &skills.Annotations{}, false, false, true},
		{"delete_record", nil, false, true, true},
		{"records.drop", nil, false, true, true},
		{"cache-purge", nil, false, true, true},
		{"removeUser", nil, false, true, true},
		{"DROPTable", nil, false, true, true},
		{"HTTPDelete", nil, false, true, true},
		{"EraseAll", nil, false, true, true},
		{"truncate", nil, false, true, true},
		{"WIPE_DISK", nil, false, true, true},
		{"destroy stack", nil, false, true, true},
		{"undelete_record", nil, false, false, true},
		{"dropdown_options", nil, false, false, true},
		{"removed_items_report", nil, false, false, true},
		{"archive", &skills.Annotations{DestructiveHint: ptr(true)}, false, true, true},
		{"archive", &skills.Annotations{DestructiveHint: ptr(false)}, false, false, true},
		// The name wins over an explicit destructiveHint false.
		{"delete_record", &skills.Annotations{DestructiveHint: ptr(false)}, false, true, true},
		// Read-only wins over everything.
		{"delete_record", &skills.Annotations{ReadOnlyHint: ptr(true), DestructiveHint: ptr(true)}, true, false, true},
		{"lookup", &skills.Annotations{ReadOnlyHint: ptr(false)}, false, false, true},
		{"lookup", &skills.Annotations{OpenWorldHint: ptr(false)}, false, false, false},
		{"lookup", &skills.Annotations{OpenWorldHint: ptr(true)}, false, false, true},
	}
	for _, tc := range cases {
		m := skills.Manifest{Name: tc.name, Annotations: tc.ann}
		if got := m.ReadOnly(); got != tc.readOnly {
			t.Errorf("%s %+v: ReadOnly = %v, want %v", tc.name, tc.ann, got, tc.readOnly)
		}
		if got := m.Destructive(); got != tc.destructive {
			t.Errorf("%s %+v: Destructive = %v, want %v", tc.name, tc.ann, got, tc.destructive)
		}
		if got := m.OpenWorld(); got != tc.openWld {
			t.Errorf("%s %+v: OpenWorld = %v, want %v", tc.name, tc.ann, got, tc.openWld)
		}
	}
}

// TestManifestAnnotationsDecode: a manifest from a Skill Service without
// annotations, or with odd ones, still decodes.
func TestManifestAnnotationsDecode(t *testing.T) {
	cases := []struct {
		annotations string // "" for none
		want        *skills.Annotations
	}{
		{"", nil},
		{`,"annotations":null`, nil},
		{`,"annotations":{}`, &skills.Annotations{}},
		{`,"annotations":{"readOnlyHint":true,"openWorldHint":false,"title":"T","futureHint":{"x":1}}`,
			&skills.Annotations{ReadOnlyHint: ptr(true), OpenWorldHint: ptr(false)}},
		{`,"annotations":{"destructiveHint":"yes","idempotentHint":null,"readOnlyHint":false}`,
			&skills.Annotations{ReadOnlyHint: ptr(false)}},
		{`,"annotations":"read-only"`, &skills.Annotations{}},
		{`,"annotations":[true]`, &skills.Annotations{}},
	}
	for _, tc := range cases {
		doc := `{"name":"s","description":"d","input_schema":{"type":"object"},"output_schema":{"type":"object"},` +
			`"execution_mode":"sync"` + tc.annotations + `}`
		var m skills.Manifest
		if err := json.Unmarshal([]byte(doc), &m); err != nil {
			t.Fatalf("%s: %v", doc, err)
		}
		if m.Name != "s" || !reflect.DeepEqual(m.Annotations, tc.want) {
			t.Fatalf("%s: decoded %+v, annotations %+v, want %+v", doc, m, m.Annotations, tc.want)
		}
	}
	b, err := json.Marshal(skills.Manifest{Name: "s", Annotations: &skills.Annotations{DestructiveHint: ptr(false)}})
	if err != nil {
		t.Fatal(err)
	}
	var back map[string]json.RawMessage
	if err := json.Unmarshal(b, &back); err != nil || string(back["annotations"]) != `{"destructiveHint":false}` {
		t.Fatalf("encoded %s", b)
	}
	var bare map[string]json.RawMessage
	if b, _ := json.Marshal(skills.Manifest{Name: "s"}); json.Unmarshal(b, &bare) != nil || bare["annotations"] != nil {
		t.Fatalf("a manifest without annotations encodes %s", b)
	}
}

// TestAnnotationsSkillService: load_skill's manifests from the demo Skill
// Service carry the annotations its tools/list declares.
func TestAnnotationsSkillService(t *testing.T) {
	srv := newDemoServer(t, nil)
	url := srv.URL + "/tenants/{tenant}/mcp"
	c := newClient(t, skills.Config{URL: url, Mode: skills.ModeSkillService})
	ctx := testCtx(t)
	mode, tools, err := skills.DetectMode(ctx, newClient(t, skills.Config{URL: url}), "acme")
	if err != nil || mode != skills.ModeSkillService {
		t.Fatalf("DetectMode = %s, %v", mode, err)
	}
	loaded := 0
	for _, tool := range tools {
		if tool.Name == skills.ToolFindRelevantSkills || tool.Name == skills.ToolLoadSkill {
			continue
		}
		m, err := c.Load(ctx, "acme", tool.Name)
		if err != nil {
			t.Fatalf("Load(%s): %v", tool.Name, err)
		}
		listed := &skills.Annotations{
			ReadOnlyHint:    tool.Annotations.ReadOnlyHint,
			DestructiveHint: tool.Annotations.DestructiveHint,
			IdempotentHint:  tool.Annotations.IdempotentHint,
			OpenWorldHint:   tool.Annotations.OpenWorldHint,
		}
		if !reflect.DeepEqual(m.Annotations, listed) {
			t.Fatalf("%s: manifest annotations %+v, tools/list %+v", tool.Name, m.Annotations, listed)
		}
		if a := m.Annotations; !m.ReadOnly() || m.Destructive() || m.OpenWorld() ||
			a.IdempotentHint == nil || !*a.IdempotentHint || a.DestructiveHint == nil || *a.DestructiveHint {
			t.Fatalf("%s: annotations %+v: ReadOnly %v, Destructive %v, OpenWorld %v",
				tool.Name, a, m.ReadOnly(), m.Destructive(), m.OpenWorld())
		}
		loaded++
	}
	if loaded != 4 {
		t.Fatalf("loaded %d skills, want acme's 4", loaded)
	}
}

// newAnnotatedServer serves, over streamable HTTP at /mcp, a plain MCP
// server whose tools carry assorted annotations. delete_record refuses
// every call and archive_records fails.
func newAnnotatedServer(t *testing.T) *httptest.Server {
	t.Helper()
	s := server.NewMCPServer("annotated", "1.0.0", server.WithToolCapabilities(false))
	answer := func(res *mcp.CallToolResult) server.ToolHandlerFunc {
		return func(context.Context, mcp.CallToolRequest) (*mcp.CallToolResult, error) { return res, nil }
	}
	// mcp.NewTool presets every hint, so each tool sets its annotations whole.
	s.AddTool(mcp.NewTool("archive_records", mcp.WithDescription("Archive old records"),
		mcp.WithToolAnnotation(mcp.ToolAnnotation{DestructiveHint: mcp.ToBoolPtr(true)})),
		answer(mcp.NewToolResultError("archive volume is full")))
	s.AddTool(mcp.NewTool("delete_record", mcp.WithDescription("Delete one record"),
		mcp.WithToolAnnotation(mcp.ToolAnnotation{})),
		answer(mcp.NewToolResultError("Forbidden: this key may not delete records")))
	s.AddTool(mcp.NewTool("lookup_record", mcp.WithDescription("Look up one record"),
		mcp.WithToolAnnotation(mcp.ToolAnnotation{ReadOnlyHint: mcp.ToBoolPtr(true), OpenWorldHint: mcp.ToBoolPtr(false)})),
		answer(mcp.NewToolResultText("record 7")))
	s.AddTool(mcp.NewTool("send_notice", mcp.WithDescription("Send a notice"),
		mcp.WithToolAnnotation(mcp.ToolAnnotation{Title: "Send notice"})),
		answer(mcp.NewToolResultText("sent")))
	mux := http.NewServeMux()
	mux.Handle("/mcp", server.NewStreamableHTTPServer(s, server.WithStreamableHTTPLogger(slog.New(slog.DiscardHandler))))
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv
}

// TestAnnotationsPlainMode: plain mode copies the hints a server's
// tools/list sets, and only those, into the manifests.
func TestAnnotationsPlainMode(t *testing.T) {
	srv := newAnnotatedServer(t)
	c := newClient(t, skills.Config{URL: srv.URL + "/mcp"})
	ctx := testCtx(t)
	cases := []struct {
		name                           string
		want                           *skills.Annotations
		readOnly, destructive, openWld bool
	}{
		{"archive_records", &skills.Annotations{DestructiveHint: ptr(true)}, false, true, true},
		{"delete_record", nil, false, true, true},
		{"lookup_record", &skills.Annotations{ReadOnlyHint: ptr(true), OpenWorldHint: ptr(false)}, true, false, false},
		{"send_notice", nil, false, false, true},
	}
	for _, tc := range cases {
		m, err := c.Load(ctx, "t1", tc.name)
		if err != nil {
			t.Fatalf("Load(%s): %v", tc.name, err)
		}
		if !reflect.DeepEqual(m.Annotations, tc.want) {
			t.Fatalf("%s: annotations %+v, want %+v", tc.name, m.Annotations, tc.want)
		}
		if m.ReadOnly() != tc.readOnly || m.Destructive() != tc.destructive || m.OpenWorld() != tc.openWld {
			t.Fatalf("%s: ReadOnly %v, Destructive %v, OpenWorld %v; want %v, %v, %v", tc.name,
				m.ReadOnly(), m.Destructive(), m.OpenWorld(), tc.readOnly, tc.destructive, tc.openWld)
		}
		again, err := c.Load(ctx, "t1", tc.name)
		if err != nil || !reflect.DeepEqual(again.Annotations, tc.want) {
			t.Fatalf("%s: cached load = %+v, %v", tc.name, again.Annotations, err)
		}
	}

	// A refusing tool error is a permission denial; any other stays a
	// skill failure.
	_, err := c.Call(ctx, "t1", "delete_record", nil, "")
	if !errors.Is(err, skills.ErrPermissionDenied) || errors.Is(err, skills.ErrSkillFailed) {
		t.Fatalf("delete_record err = %v, want ErrPermissionDenied only", err)
	}
	_, err = c.Call(ctx, "t1", "archive_records", nil, "")
	if !errors.Is(err, skills.ErrSkillFailed) || errors.Is(err, skills.ErrPermissionDenied) {
		t.Fatalf("archive_records err = %v, want ErrSkillFailed only", err)
	}
	if _, err := c.Call(ctx, "t1", "lookup_record", nil, ""); err != nil {
		t.Fatal(err)
	}
}
