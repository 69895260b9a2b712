package text

import "unicode/utf8"

// Clip cuts s to at most n bytes, an ellipsis marking the cut, never
// inside a rune.
func Clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	cut := max(n-len("…"), 0)
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}
