package tools_test

import (
	"strings"
	"testing"

	"github.com/agentbus/agentbus/tools"
)

// TestRedact: personal data and credentials are masked in what is logged
// about a tool call; other text is kept, and the excerpt is bounded.
func TestRedact(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{`{"email":"jane.doe+x@example.co.uk"}`, `{"email":"[EMAIL]"}`},
		{"call +1 415-555-0132 or (020) 7946 0958", "call [PHONE] or [PHONE]"},
		{"card 4111 1111 1111 1111 exp", "card [CARD] exp"},
		{"card 4111111111111111", "card [CARD]"},
		{"Authorization: Bearer abc.def-123456", "Authorization: Bearer [REDACTED]"},
		{`{"password":"hunter22","user":"j"}`, `{"password":"[REDACTED]","user":"j"}`},
		{`{"api_key":"k-123"}`, `{"api_key":"[REDACTED]"}`},
		{"jwt eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.sig_nature", "jwt [JWT]"},
		{`{"order_id":"42","qty":3}`, `{"order_id":"42","qty":3}`},
	} {
		if got := tools.Redact(c.in); got != c.want {
			t.Errorf("Redact(%q) = %q, want %q", c.in, got, c.want)
		}
	}
	long := tools.Redact(strings.Repeat("a", 10*tools.MaxLogExcerpt))
	if len(long) > tools.MaxLogExcerpt+len("…") {
		t.Fatalf("excerpt of %d bytes", len(long))
	}
}
