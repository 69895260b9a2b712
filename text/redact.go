package text

import (
	"regexp"
	"unicode/utf8"
)

// redactions are the patterns of personal data and credentials masked in
// what agentbus keeps or logs of a call's content, in the order they are
// applied.
var redactions = []struct {
	re   *regexp.Regexp
	with string
}{
	{regexp.MustCompile(`(?i)\b(bearer|basic|token|apikey|api_key|api-key)(\s*[:=]?\s*)[A-Za-z0-9._~+/=-]{6,}`), "$1$2[REDACTED]"},
	{regexp.MustCompile(`(?i)"(password|secret|token|api_key|apikey|authorization)"\s*:\s*"[^"]*"`), `"$1":"[REDACTED]"`},
	{regexp.MustCompile(`\beyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]+`), "[JWT]"},
	{regexp.MustCompile(`[A-Za-z0-9._%+-]+@[A-Za-z0-9.-]+\.[A-Za-z]{2,}`), "[EMAIL]"},
	{regexp.MustCompile(`\b(?:\d[ -]?){12,18}\d\b`), "[CARD]"},
	{regexp.MustCompile(`(?:\+\d{1,3}[ .-]?)?(?:\(\d{1,4}\)[ .-]?)?\b\d{2,4}(?:[ .-]\d{3,4}){1,2}\b`), "[PHONE]"},
}

// Redact returns s with e-mail addresses, phone numbers, card-like
// numbers, bearer tokens, JWTs and secret-named JSON fields masked, cut to
// max bytes (an ellipsis marks the cut).
func Redact(s string, max int) string {
	if len(s) > 4*max {
		s = s[:4*max] // the masks shorten what they match; no more is kept
	}
	for _, r := range redactions {
		s = r.re.ReplaceAllString(s, r.with)
	}
	if len(s) > max {
		for max > 0 && !utf8.RuneStart(s[max]) {
			max-- // no rune is cut in two
		}
		s = s[:max] + "…"
	}
	return s
}
