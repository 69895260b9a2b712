package embedded

import (
	"regexp"
	"testing"
)

func TestEscapeRoundTrip(t *testing.T) {
	valid := regexp.MustCompile(`^[-_a-zA-Z0-9]+$`)
	seen := map[string]string{}
	for _, s := range []string{
		"tenant:session:task:label", "a.b", "a_b", "_", "a b/c*>", "ünïcødé", "x_5F", "-", "A-z-09",
	} {
		e := escape(s)
		if !valid.MatchString(e) {
			t.Errorf("escape(%q) = %q: not a safe key/token", s, e)
		}
		if e == emptyToken {
			t.Errorf("escape(%q) collides with the empty token", s)
		}
		if prev, ok := seen[e]; ok {
			t.Errorf("escape(%q) == escape(%q) == %q", s, prev, e)
		}
		seen[e] = s
		got, err := unescape(e)
		if err != nil || got != s {
			t.Errorf("unescape(escape(%q)) = %q, %v", s, got, err)
		}
	}
	for _, bad := range []string{"_", "_4", "_ZZ", "a_g0"} {
		if _, err := unescape(bad); err == nil {
			t.Errorf("unescape(%q) succeeded", bad)
		}
	}
}
