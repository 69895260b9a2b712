package skills_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"log/slog"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"

	json "github.com/go-json-experiment/json/v1"
	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/agentbus/agentbus/schema"
	"github.com/agentbus/agentbus/skills"
)

// The data of the media server's items.
var (
	pngData  = bytes.Repeat([]byte("\x89PNG\r\n\x1a\nchart-pixels"), 40)
	wavData  = bytes.Repeat([]byte("RIFF....WAVEfmt narration"), 40)
	pdfData  = bytes.Repeat([]byte("%PDF-1.7 quarterly report"), 40)
	csvData  = strings.Repeat("outlet,score\nA,0.91\n", 40)
	mediaB64 = []string{b64(pngData), b64(wavData), b64(pdfData)}
)

func b64(b []byte) string { return base64.StdEncoding.EncodeToString(b) }

func hexSHA(b []byte) string {
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// newMediaServer serves, over streamable HTTP, a plain MCP server whose
// tools answer with non-text content: render (text, an image, audio, an
// embedded blob and text resource and a resource link), snapshot (an
// image only) and dump (text of n bytes).
func newMediaServer(t *testing.T) string {
	t.Helper()
	s := server.NewMCPServer("media", "1.0.0", server.WithToolCapabilities(false))
	s.AddTool(mcp.NewTool("render", mcp.WithDescription("Render the engagement chart")),
		func(context.Context, mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{
				mcp.NewTextContent("chart rendered"),
				mcp.NewImageContent(b64(pngData), "image/png"),
				mcp.NewAudioContent(b64(wavData), "audio/wav"),
				mcp.NewEmbeddedResource(mcp.BlobResourceContents{URI: "file:///reports/q3.pdf", MIMEType: "application/pdf", Blob: b64(pdfData)}),
				mcp.NewEmbeddedResource(mcp.TextResourceContents{URI: "file:///reports/q3.csv", MIMEType: "text/csv", Text: csvData}),
				mcp.NewResourceLink("https://cdn.example/q3.mp4", "q3 video", "The full video", "video/mp4"),
			}}, nil
		})
	s.AddTool(mcp.NewTool("snapshot", mcp.WithDescription("Take a snapshot")),
		func(context.Context, mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{mcp.NewImageContent(b64(pngData), "image/png")}}, nil
		})
	s.AddTool(mcp.NewTool("dump", mcp.WithDescription("Dump the log"), mcp.WithNumber("n")),
		func(_ context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return mcp.NewToolResultText(strings.Repeat("x", req.GetInt("n", 0))), nil
		})
	srv := httptest.NewServer(server.NewStreamableHTTPServer(s, server.WithStreamableHTTPLogger(slog.New(slog.DiscardHandler))))
	t.Cleanup(srv.Close)
	return srv.URL
}

// recordingStore is an AttachmentStore that keeps what it is given.
type recordingStore struct {
	mu   sync.Mutex
	puts map[string][]byte // by ref
}

func (s *recordingStore) Put(_ context.Context, tenant string, a skills.Attachment, data []byte) (string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	ref := "mem://" + tenant + "/" + a.Kind + "/" + a.SHA256
	s.puts[ref] = bytes.Clone(data)
	return ref, nil
}

type textResult struct {
	Text        *string             `json:"text"`
	Attachments []skills.Attachment `json:"attachments"`
}

// TestCallStoresAttachmentsByReference: a plain tool's images, audio and
// embedded resources are described in Call's result, their data put in
// the store and never inlined; a resource link is described by its URI.
func TestCallStoresAttachmentsByReference(t *testing.T) {
	url := newMediaServer(t)
	store := &recordingStore{puts: map[string][]byte{}}
	c := newClient(t, skills.Config{URL: url, Attachments: store})
	ctx := testCtx(t)

	out, err := c.Call(ctx, "t1", "render", nil, "")
	if err != nil {
		t.Fatal(err)
	}
	if err := schema.Validate(skills.TextOutputSchema, out); err != nil {
		t.Fatalf("the result does not match TextOutputSchema: %v\n%s", err, out)
	}
	var res textResult
	if err := json.Unmarshal(out, &res); err != nil {
		t.Fatal(err)
	}
	if res.Text == nil || *res.Text != "chart rendered" {
		t.Fatalf("text = %v, want the text content", res.Text)
	}
	want := []struct {
		kind, mime, uri string
		data            []byte
	}{
		{"image", "image/png", "", pngData},
		{"audio", "audio/wav", "", wavData},
		{"resource", "application/pdf", "file:///reports/q3.pdf", pdfData},
		{"resource", "text/csv", "file:///reports/q3.csv", []byte(csvData)},
		{"resource_link", "video/mp4", "https://cdn.example/q3.mp4", nil},
	}
	if len(res.Attachments) != len(want) {
		t.Fatalf("attachments = %+v, want %d", res.Attachments, len(want))
	}
	for i, w := range want {
		a := res.Attachments[i]
		if a.Kind != w.kind || a.MimeType != w.mime || a.URI != w.uri {
			t.Errorf("attachment %d = %+v, want %s %s %s", i, a, w.kind, w.mime, w.uri)
		}
		if w.data == nil {
			if a.Size != 0 || a.SHA256 != "" || a.Ref != "" {
				t.Errorf("resource link %+v has data", a)
			}
			continue
		}
		if a.Size != len(w.data) || a.SHA256 != hexSHA(w.data) {
			t.Errorf("attachment %d: size %d sha256 %s, want %d %s", i, a.Size, a.SHA256, len(w.data), hexSHA(w.data))
		}
		if stored, ok := store.puts[a.Ref]; !ok || !bytes.Equal(stored, w.data) {
			t.Errorf("attachment %d: ref %q does not hold its data", i, a.Ref)
		}
	}
	if len(store.puts) != 4 {
		t.Errorf("%d puts, want the 4 items with data", len(store.puts))
	}
	assertNoData(t, out)

	// Without a store: described, not stored, still not inlined.
	out, err = newClient(t, skills.Config{URL: url}).Call(ctx, "t1", "render", nil, "")
	if err != nil {
		t.Fatal(err)
	}
	res = textResult{}
	if err := json.Unmarshal(out, &res); err != nil || len(res.Attachments) != len(want) {
		t.Fatalf("without a store: %s (%v)", out, err)
	}
	for _, a := range res.Attachments {
		if a.Ref != "" || (a.Kind != "resource_link" && a.SHA256 == "") {
			t.Errorf("without a store: %+v", a)
		}
	}
	assertNoData(t, out)
}

// assertNoData fails if out holds any of the media server's data, encoded
// or not.
func assertNoData(t *testing.T, out []byte) {
	t.Helper()
	for _, s := range append(mediaB64, csvData, string(pngData[:16])) {
		if strings.Contains(string(out), s) {
			t.Fatalf("the result inlines data: %.80s…", s)
		}
	}
}

// TestCallImageOnly: a result with only an image is a result, in plain
// mode (empty text) and in Skill Service mode ({"attachments": [...]}).
func TestCallImageOnly(t *testing.T) {
	url := newMediaServer(t)
	ctx := testCtx(t)
	for _, mode := range []string{skills.ModePlain, skills.ModeSkillService} {
		store := &recordingStore{puts: map[string][]byte{}}
		out, err := newClient(t, skills.Config{URL: url, Mode: mode, Attachments: store}).Call(ctx, "t1", "snapshot", nil, "")
		if err != nil {
			t.Fatalf("%s: %v", mode, err)
		}
		var res textResult
		if err := json.Unmarshal(out, &res); err != nil || len(res.Attachments) != 1 {
			t.Fatalf("%s: %s (%v)", mode, out, err)
		}
		if (mode == skills.ModePlain) != (res.Text != nil && *res.Text == "") {
			t.Errorf("%s: text %v", mode, res.Text)
		}
		a := res.Attachments[0]
		if a.Kind != "image" || a.MimeType != "image/png" || a.Size != len(pngData) || !bytes.Equal(store.puts[a.Ref], pngData) {
			t.Errorf("%s: attachment %+v", mode, a)
		}
		assertNoData(t, out)
	}
}

// TestCallResultCap: a text or an attachment over Config.MaxResultBytes
// fails the call with ErrResultTooLarge, a skill failure, and stores
// nothing.
func TestCallResultCap(t *testing.T) {
	url := newMediaServer(t)
	ctx := testCtx(t)
	store := &recordingStore{puts: map[string][]byte{}}
	limit := len(pngData) - 1
	for _, mode := range []string{skills.ModePlain, skills.ModeSkillService} {
		c := newClient(t, skills.Config{URL: url, Mode: mode, Attachments: store, MaxResultBytes: limit})
		cases := []struct {
			tool, args, part string
			size             int
		}{
			{"dump", `{"n":` + strconv.Itoa(limit+1) + `}`, "text", limit + 1},
			{"snapshot", `{}`, "image", len(pngData)},
		}
		for _, tc := range cases {
			_, err := c.Call(ctx, "t1", tc.tool, json.RawMessage(tc.args), "")
			if !errors.Is(err, skills.ErrResultTooLarge) || !errors.Is(err, skills.ErrSkillFailed) {
				t.Fatalf("%s %s: err = %v, want ErrResultTooLarge and ErrSkillFailed", mode, tc.tool, err)
			}
			if want := tc.part + " of " + strconv.Itoa(tc.size) + " bytes exceeds the cap of " + strconv.Itoa(limit) + " bytes"; !strings.Contains(err.Error(), want) {
				t.Errorf("%s %s: %v, want it to say %q", mode, tc.tool, err, want)
			}
		}
		if out, err := c.Call(ctx, "t1", "dump", json.RawMessage(`{"n":`+strconv.Itoa(limit)+`}`), ""); err != nil || len(out) < limit {
			t.Fatalf("%s: a text at the cap: %d bytes, %v", mode, len(out), err)
		}
	}
	if len(store.puts) != 0 {
		t.Fatalf("an over-cap result stored %d attachments", len(store.puts))
	}
}
