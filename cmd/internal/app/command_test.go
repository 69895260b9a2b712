package app

import (
	"strings"
	"testing"
)

func TestRunCommand(t *testing.T) {
	var got []string
	cmds := map[string]func([]string) int{"go": func(args []string) int { got = args; return 7 }}
	for _, tc := range []struct {
		args         []string
		code         int
		stdout, errs string
	}{
		{nil, 2, "", "USAGE"},
		{[]string{"help"}, 0, "USAGE", ""},
		{[]string{"--help"}, 0, "USAGE", ""},
		{[]string{"nope"}, 2, "", `prog: unknown command "nope"`},
		{[]string{"go", "a", "b"}, 7, "", ""},
	} {
		var stdout, stderr strings.Builder
		if code := RunCommand("prog", "USAGE", tc.args, cmds, &stdout, &stderr); code != tc.code {
			t.Errorf("%v: code %d, want %d", tc.args, code, tc.code)
		}
		if !strings.Contains(stdout.String(), tc.stdout) || (tc.stdout == "" && stdout.Len() > 0) {
			t.Errorf("%v: stdout %q, want %q", tc.args, stdout.String(), tc.stdout)
		}
		if !strings.Contains(stderr.String(), tc.errs) || (tc.errs == "" && stderr.Len() > 0) {
			t.Errorf("%v: stderr %q, want %q", tc.args, stderr.String(), tc.errs)
		}
	}
	if strings.Join(got, " ") != "a b" {
		t.Errorf("the command got %v, want [a b]", got)
	}
}
