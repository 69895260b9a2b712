package app

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// demoPackage is the demo Skill Service, which only the all-in-one binary
// may link.
const demoPackage = "github.com/agentbus/agentbus/skills/demo"

// allInOne is the binary that serves the demo Skill Service (agentbus up,
// demo and skills).
const allInOne = "agentbus"

// TestRoleBinariesDoNotLinkTheDemo: no role binary (every cmd/<name> with
// a main.go but cmd/agentbus) depends on the demo Skill Service, directly
// or through this package; the all-in-one does, which shows the check
// sees it.
func TestRoleBinariesDoNotLinkTheDemo(t *testing.T) {
	cmdDir, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	entries, err := os.ReadDir(cmdDir)
	if err != nil {
		t.Fatal(err)
	}
	var pkgs []string
	for _, e := range entries {
		if _, err := os.Stat(filepath.Join(cmdDir, e.Name(), "main.go")); e.IsDir() && err == nil {
			pkgs = append(pkgs, "./"+e.Name())
		}
	}
	if len(pkgs) < 2 || !slices.Contains(pkgs, "./"+allInOne) {
		t.Fatalf("binaries found in %s: %v, want the roles and %s", cmdDir, pkgs, allInOne)
	}

	// One go list for every binary: its import path, then its dependencies.
	cmd := exec.Command("go", append([]string{"list", "-f", `{{.ImportPath}} {{join .Deps " "}}`}, pkgs...)...)
	cmd.Dir = cmdDir
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, stderr(err))
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	if len(lines) != len(pkgs) {
		t.Fatalf("go list printed %d lines for %d binaries:\n%s", len(lines), len(pkgs), out)
	}
	for _, line := range lines {
		fields := strings.Fields(line)
		bin, deps := filepath.Base(fields[0]), fields[1:]
		links := slices.Contains(deps, demoPackage)
		switch {
		case bin == allInOne && !links:
			t.Errorf("%s does not depend on %s: the check no longer sees it", bin, demoPackage)
		case bin != allInOne && links:
			t.Errorf("role binary %s links the demo Skill Service (%s); pass it in from cmd/%s instead", bin, demoPackage, allInOne)
		}
	}
}

// stderr returns the standard error an *exec.ExitError carries.
func stderr(err error) string {
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return string(ee.Stderr)
	}
	return ""
}
