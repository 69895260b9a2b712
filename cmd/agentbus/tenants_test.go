package main

import (
	"bytes"
	"errors"
	"regexp"
	"strings"
	"testing"

	"github.com/agentbus/agentbus/auth"
	"github.com/agentbus/agentbus/events/eventstest"
)

var (
	printedKeyRE = regexp.MustCompile(`(?m)^  (abk_[0-9a-f]{12}_[A-Za-z0-9_-]{43})$`)
	printedIDRE  = regexp.MustCompile(`(?m)^Key id: ([0-9a-f]{12})$`)
)

// runTenants runs the tenants command and returns its exit code and output.
func runTenants(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	code := tenantsMain(t.Context(), args, &stdout, &stderr)
	return code, stdout.String(), stderr.String()
}

// issued returns the key and key id a create or rotate printed.
func issued(t *testing.T, out string) (key, id string) {
	t.Helper()
	k, i := printedKeyRE.FindStringSubmatch(out), printedIDRE.FindStringSubmatch(out)
	if k == nil || i == nil || !strings.Contains(out, "will not be shown again") || !strings.HasPrefix(k[1], auth.KeyPrefix+i[1]+"_") {
		t.Fatalf("output does not show a key, its id and the warning:\n%s", out)
	}
	return k[1], i[1]
}

func TestTenantsKeyLifecycle(t *testing.T) {
	s := eventstest.Server(t)
	_, js := eventstest.Connect(t, s)
	url := s.ClientURL()
	keys, err := auth.NewKeys(t.Context(), js)
	if err != nil {
		t.Fatal(err)
	}
	accepted := func(key, tenant, user string) {
		t.Helper()
		id, err := keys.Verify(t.Context(), key)
		if err != nil || id.TenantID != tenant || id.UserID != user {
			t.Fatalf("Verify = %+v, %v; want tenant %s user %s", id, err, tenant, user)
		}
	}
	refused := func(key string) {
		t.Helper()
		if _, err := keys.Verify(t.Context(), key); !errors.Is(err, auth.ErrUnauthenticated) {
			t.Fatalf("Verify = %v; want ErrUnauthenticated", err)
		}
	}
	list := func(args ...string) string {
		t.Helper()
		code, out, errOut := runTenants(t, append([]string{"list", "--nats", url}, args...)...)
		if code != 0 {
			t.Fatalf("list exited %d: %s", code, errOut)
		}
		if strings.Contains(out, "argon2") || strings.Contains(strings.ToLower(out), "hash") {
			t.Fatalf("list shows a hash:\n%s", out)
		}
		return out
	}

	code, out, errOut := runTenants(t, "create", "--nats", url, "--tenant", "acme", "--user", "alice")
	if code != 0 {
		t.Fatalf("create exited %d: %s", code, errOut)
	}
	key, id := issued(t, out)
	accepted(key, "acme", "alice")
	if code, out, _ := runTenants(t, "create", "--tenant", "globex", "--nats", url); code != 0 {
		t.Fatalf("create globex exited %d", code)
	} else {
		other, _ := issued(t, out)
		accepted(other, "globex", "")
	}

	out = list("--tenant", "acme")
	secret := key[len(auth.KeyPrefix+id+"_"):]
	if !regexp.MustCompile(`(?m)^`+id+`\s+acme\s+alice\s+\S+\s+active\s+-\s*$`).MatchString(out) ||
		strings.Contains(out, secret) || strings.Contains(out, "globex") {
		t.Fatalf("list --tenant acme:\n%s", out)
	}
	if out = list(); !strings.Contains(out, "globex") || !strings.Contains(out, "KEY ID") {
		t.Fatalf("list:\n%s", out)
	}

	// Rotate, key id after the flags or before them.
	code, out, errOut = runTenants(t, "rotate", id, "--nats", url)
	if code != 0 {
		t.Fatalf("rotate exited %d: %s", code, errOut)
	}
	newKey, newID := issued(t, out)
	refused(key)
	accepted(newKey, "acme", "alice")
	out = list("--tenant", "acme")
	if !regexp.MustCompile(`(?m)^`+id+`\s.*\sreplaced\s+`+newID+`\s*$`).MatchString(out) ||
		!regexp.MustCompile(`(?m)^`+newID+`\s.*\sactive\s`).MatchString(out) {
		t.Fatalf("list after rotate:\n%s", out)
	}

	if code, _, errOut := runTenants(t, "revoke", "--nats", url, newID); code != 0 {
		t.Fatalf("revoke exited %d: %s", code, errOut)
	}
	refused(newKey)
	if out = list("--tenant", "acme"); !regexp.MustCompile(`(?m)^` + newID + `\s.*\srevoked\s`).MatchString(out) {
		t.Fatalf("list after revoke:\n%s", out)
	}

	// Failures exit 1 and say why.
	for _, args := range [][]string{
		{"rotate", "--nats", url, newID},          // already revoked
		{"revoke", "--nats", url, "0123456789ab"}, // unknown
		{"rotate", "--nats", url, "nope"},
		{"list", "--nats", "nats://127.0.0.1:1"}, // no NATS there
	} {
		code, _, errOut := runTenants(t, args...)
		if code != 1 || !strings.HasPrefix(errOut, "agentbus tenants "+args[0]+": ") {
			t.Errorf("%v: exit %d, stderr %q; want 1 and a message", args, code, errOut)
		}
	}
}

func TestTenantsUsage(t *testing.T) {
	for _, tc := range []struct {
		args []string
		code int
		want string // in stdout or stderr
	}{
		{nil, 2, "Usage: agentbus tenants"},
		{[]string{"--help"}, 0, "rotate <key id>"},
		{[]string{"bogus"}, 2, `unknown command "bogus"`},
		{[]string{"create", "--help"}, 0, "-tenant"},
		{[]string{"list", "-h"}, 0, "-nats"},
		{[]string{"rotate", "--help"}, 0, "<key id>"},
		{[]string{"revoke", "--help"}, 0, "<key id>"},
		{[]string{"create"}, 2, "--tenant is required"},
		{[]string{"create", "--tenant", "acme.*"}, 2, "ids are 1 to 64"},
		{[]string{"create", "--tenant", "acme", "--user", "a>b"}, 2, "ids are 1 to 64"},
		{[]string{"create", "--tenant", "acme", "extra"}, 2, "want 0 argument(s)"},
		{[]string{"list", "--tenant", "a b"}, 2, "ids are 1 to 64"},
		{[]string{"rotate"}, 2, "want 1 argument(s)"},
		{[]string{"revoke", "a", "b"}, 2, "want 1 argument(s)"},
		{[]string{"revoke", "--bogus", "a"}, 2, "flag provided but not defined"},
	} {
		code, out, errOut := runTenants(t, tc.args...)
		if code != tc.code || !strings.Contains(out+errOut, tc.want) {
			t.Errorf("tenants %v: exit %d, output %q; want %d and %q", tc.args, code, out+errOut, tc.code, tc.want)
		}
	}
}
