package embedded

import (
	"fmt"
	"strings"
)

// emptyToken stands for an absent optional id (no user, no session). The
// escape below never produces a lone "_", so it cannot collide.
const emptyToken = "_"

const hexDigits = "0123456789ABCDEF"

// escape maps s to a string over [A-Za-z0-9_-] that is a valid KV key and
// subject token: letters, digits and '-' are kept, every other byte
// (including '_') becomes "_XX".
func escape(s string) string {
	var sb strings.Builder
	sb.Grow(len(s))
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' {
			sb.WriteByte(c)
			continue
		}
		sb.WriteByte('_')
		sb.WriteByte(hexDigits[c>>4])
		sb.WriteByte(hexDigits[c&0x0f])
	}
	return sb.String()
}

// unescape inverts escape.
func unescape(s string) (string, error) {
	var sb strings.Builder
	sb.Grow(len(s))
	for i := 0; i < len(s); i++ {
		if s[i] != '_' {
			sb.WriteByte(s[i])
			continue
		}
		if i+2 >= len(s) {
			return "", fmt.Errorf("embedded: truncated escape in %q", s)
		}
		hi, lo := strings.IndexByte(hexDigits, s[i+1]), strings.IndexByte(hexDigits, s[i+2])
		if hi < 0 || lo < 0 {
			return "", fmt.Errorf("embedded: bad escape in %q", s)
		}
		sb.WriteByte(byte(hi<<4 | lo))
		i += 2
	}
	return sb.String(), nil
}

// optionalToken escapes s, or returns emptyToken when s is empty.
func optionalToken(s string) string {
	if s == "" {
		return emptyToken
	}
	return escape(s)
}
