package layering_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentbus/agentbus/internal/layering"
)

const root = "../.."

func rules(t *testing.T) layering.Rules {
	t.Helper()
	md, err := os.ReadFile(filepath.Join(root, "docs", "ARCHITECTURE.md"))
	if err != nil {
		t.Fatal(err)
	}
	r, err := layering.ParseTable(md)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// The module's real import graph keeps to the table of docs/ARCHITECTURE.md.
func TestImportsKeepToTheArchitectureTable(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	graph, err := layering.Graph(ctx, root)
	if err != nil {
		t.Fatal(err)
	}
	for _, must := range []string{"orch", "store", "llm", "domain", "events"} {
		if _, ok := graph[must]; !ok {
			t.Fatalf("the graph has no package %s: go list read the wrong module", must)
		}
	}
	if v := rules(t).Check(graph); len(v) > 0 {
		t.Fatalf("%d imports break the layering (docs/ARCHITECTURE.md, \"may import\"):\n  %s", len(v), strings.Join(v, "\n  "))
	}
}

// An edge the table forbids fails the check: the decider importing the
// model layer, and a package the table does not name.
func TestAForbiddenEdgeFailsTheCheck(t *testing.T) {
	r := rules(t)
	graph := map[string][]string{"orch": {"domain", "llm"}, "store": {"domain"}, "nowhere": nil}
	v := r.Check(graph)
	want := []string{"nowhere: not in the package table", "orch imports llm, which its row does not allow"}
	if strings.Join(v, "|") != strings.Join(want, "|") {
		t.Fatalf("violations = %q, want %q", v, want)
	}
}

func TestPatternsPickTheMostSpecificRow(t *testing.T) {
	md := []byte("text\n\n| package | owns | may import |\n|---|---|---|\n" +
		"| `a` | base | — |\n| `b/...` | tree | `a` |\n| `b/c` | leaf | `a`, `b/...` |\n| `cmd/...` | mains | `*` |\n\nafter\n")
	r, err := layering.ParseTable(md)
	if err != nil {
		t.Fatal(err)
	}
	v := r.Check(map[string][]string{
		"a":       nil,
		"b":       {"a"},
		"b/d":     {"a", "b/c"}, // b/... allows only a
		"b/c":     {"a", "b/d"},
		"cmd/x/y": {"a", "b/c"},
	})
	want := "b/d imports b/c, which its row does not allow"
	if len(v) != 1 || v[0] != want {
		t.Fatalf("violations = %q, want only %q", v, want)
	}
	if _, err := layering.ParseTable([]byte("| package | owns |\n|---|---|\n| `a` | x |\n")); err == nil {
		t.Fatal("a table without a \"may import\" column parsed")
	}
}

// maxPackageLines is the size past which a package is split (issue 35:
// "no package over about 4,000 lines"), counted over its non-test files.
const maxPackageLines = 4200

func TestNoPackageIsOverAboutFourThousandLines(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	sizes, err := layering.Sizes(ctx, root)
	if err != nil {
		t.Fatal(err)
	}
	if sizes["orch"] == 0 {
		t.Fatal("no lines counted for orch: go list read the wrong module")
	}
	for pkg, n := range sizes {
		if n > maxPackageLines {
			t.Errorf("%s has %d non-test lines, over %d: split it (docs/ARCHITECTURE.md, Packages)", pkg, n, maxPackageLines)
		}
	}
}
