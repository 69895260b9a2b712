package chat

import (
	"net/http/httptest"
	"strings"
	"testing"

	json "github.com/go-json-experiment/json/v1"
)

// TestChatRun: the last message, a user's, is the task, whether a string
// or text parts; the model names the agent (none for the default); the
// session comes from the header, else the metadata, else a new one; what
// a run cannot take is refused with its code.
func TestChatRun(t *testing.T) {
	msg := func(role, content string) ChatMessage {
		return ChatMessage{Role: role, Content: json.RawMessage(content)}
	}
	r := httptest.NewRequest("POST", "/v1/chat/completions", nil)
	req, code, err := chatRun(r, ChatRequest{Model: DefaultChatModel, Messages: []ChatMessage{
		msg("system", `"be brief"`), msg("user", `"first"`), msg("assistant", `"ok"`),
		msg("user", `[{"type":"text","text":"rank"},{"type":"text","text":"the outlets"}]`)},
		Metadata: map[string]string{"conversation_id": "conv-7"}})
	if err != nil || code != "" || req.Message != "rank\n\nthe outlets" || req.AgentID != "" || req.SessionID != "conv-7" || req.UserID != "chat" {
		t.Fatalf("%+v %q %v", req, code, err)
	}
	req, _, _ = chatRun(r, ChatRequest{Model: "support", User: "u-9", Stream: true, Messages: []ChatMessage{msg("user", `"hi"`)}})
	if req.AgentID != "support" || req.UserID != "u-9" || !req.Stream || !strings.HasPrefix(req.SessionID, "chat-") {
		t.Fatalf("%+v", req)
	}
	h := httptest.NewRequest("POST", "/v1/chat/completions", nil)
	h.Header.Set("X-Session-Id", "sess-h")
	if req, _, _ = chatRun(h, ChatRequest{Messages: []ChatMessage{msg("user", `"hi"`)}}); req.SessionID != "" {
		t.Fatalf("the header's session is the ingress's to apply, got %q", req.SessionID)
	}
	for _, c := range []struct {
		name string
		body ChatRequest
		code string
	}{
		{"no messages", ChatRequest{}, "invalid_request"},
		{"two choices", ChatRequest{N: 2, Messages: []ChatMessage{msg("user", `"hi"`)}}, "unsupported"},
		{"assistant last", ChatRequest{Messages: []ChatMessage{msg("user", `"hi"`), msg("assistant", `"yo"`)}}, "invalid_request"},
		{"image part", ChatRequest{Messages: []ChatMessage{msg("user", `[{"type":"image_url","image_url":{"url":"x"}}]`)}}, "invalid_request"},
		{"number content", ChatRequest{Messages: []ChatMessage{msg("user", `7`)}}, "invalid_request"},
	} {
		if _, code, err := chatRun(r, c.body); code != c.code || err == nil {
			t.Errorf("%s: %q %v, want %s", c.name, code, err, c.code)
		}
	}
}
