package main

import (
	"strings"
	"testing"
)

// stream is govulncheck -format json output with a called advisory
// (GO-1), one only required (GO-2), and the OSV entries.
const stream = `{"config":{"protocol_version":"v1.0.0","go_version":"go1.27.3"}}
{"osv":{"id":"GO-1","summary":"called one"}}
{"osv":{"id":"GO-2","summary":"required one"}}
{"finding":{"osv":"GO-1","trace":[{"module":"example.com/m","version":"v1.0.0"}]}}
{"finding":{"osv":"GO-1","fixed_version":"v1.0.1","trace":[{"module":"example.com/m","version":"v1.0.0","package":"example.com/m/p","function":"F"},{"module":"github.com/agentbus/agentbus","package":"github.com/agentbus/agentbus/skills","function":"call","position":{"filename":"skills/x.go","line":7}}]}}
{"finding":{"osv":"GO-2","trace":[{"module":"example.com/n","version":"v0.1.0"}]}}
`

func TestJudge(t *testing.T) {
	for _, tc := range []struct {
		name    string
		allowed map[string]string
		ok      bool
		want    []string
	}{
		{"called fails", nil, false, []string{
			"VULNERABLE: GO-1 in example.com/m@v1.0.0 (fixed: v1.0.1), called at skills/x.go:7 github.com/agentbus/agentbus/skills.call: called one",
			"note: GO-2 in example.com/n@v0.1.0", "1 called vulnerabilities, 0 allowed, 1 required but not called"}},
		{"allowed passes", map[string]string{"GO-1": "never reached"}, true, []string{
			"allowed: GO-1", "never reached", "0 called vulnerabilities, 1 allowed"}},
		{"stale allowance fails", map[string]string{"GO-1": "r", "GO-3": "gone"}, false, []string{"STALE: GO-3"}},
		{"required only is not an allowance", map[string]string{"GO-1": "r", "GO-2": "r"}, false, []string{"STALE: GO-2"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, err := readReport(strings.NewReader(stream))
			if err != nil {
				t.Fatal(err)
			}
			var out strings.Builder
			if ok := r.judge(&out, tc.allowed); ok != tc.ok {
				t.Errorf("judge = %v, want %v\n%s", ok, tc.ok, out.String())
			}
			for _, w := range tc.want {
				if !strings.Contains(out.String(), w) {
					t.Errorf("output lacks %q:\n%s", w, out.String())
				}
			}
		})
	}
}

func TestReadReportNeedsConfig(t *testing.T) {
	if _, err := readReport(strings.NewReader(`{"osv":{"id":"GO-1"}}`)); err == nil {
		t.Fatal("a stream without its config message was accepted")
	}
}

func TestParseAllow(t *testing.T) {
	got, err := parseAllow([]byte("# comment\n\nGO-2026-1 the reason # trailing\n"))
	if err != nil || len(got) != 1 || got["GO-2026-1"] != "the reason" {
		t.Fatalf("parseAllow = %v, %v", got, err)
	}
	for _, bad := range []string{"GO-2026-1\n", "CVE-1 reason\n"} {
		if _, err := parseAllow([]byte(bad)); err == nil {
			t.Errorf("parseAllow(%q) accepted", bad)
		}
	}
}
