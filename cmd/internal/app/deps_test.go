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

// devPackages are the benchmark (with its pipeline run and its view of the
// machine), the sync probe and the fault-injection harness, which only
// the development binary may link.
var devPackages = []string{"github.com/agentbus/agentbus/cmd/internal/bench", "github.com/agentbus/agentbus/cmd/internal/bench/pipeline",
	"github.com/agentbus/agentbus/cmd/internal/bench/host", "github.com/agentbus/agentbus/cmd/internal/syncprobe",
	"github.com/agentbus/agentbus/cmd/internal/chaos"}

// devOnlyModules are the import path prefixes of modules that only the
// development module (cmd/dev) requires: the Restate SDK of the benchmark's
// peer and the Kubernetes API types of the manifests' tests.
var devOnlyModules = []string{"github.com/restatedev/", "k8s.io/", "sigs.k8s.io/"}

// testOnlyModules are the import path prefixes of the requirements of
// go.mod that only tests import: chromedp drives the playground's browser,
// kin-openapi holds the HTTP tests to api/openapi.yaml (api/apitest).
var testOnlyModules = []string{"github.com/chromedp/", "github.com/getkin/"}

// allInOne is the binary that serves the demo Skill Service (agentbus up,
// demo and skills).
const allInOne = "agentbus"

// devBinary is the binary of the benchmark and the chaos harness, which no
// deployment runs.
const devBinary = "agentbus-dev"

// TestRoleBinariesDoNotLinkTheDemo: no role binary (every cmd/<name> with
// a main.go but cmd/agentbus and cmd/agentbus-dev) depends on the demo
// Skill Service, directly or through this package; the all-in-one does,
// which shows the check sees it. No binary a deployment runs (the roles
// and agentbus) links the benchmark or the chaos harness, or a package of
// a development-only module; agentbus-dev links both harnesses, which
// shows that check sees them. No binary links a test-only module.
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
	if len(pkgs) < 3 || !slices.Contains(pkgs, "./"+allInOne) || !slices.Contains(pkgs, "./"+devBinary) {
		t.Fatalf("binaries found in %s: %v, want the roles, %s and %s", cmdDir, pkgs, allInOne, devBinary)
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
		for _, dep := range deps {
			for _, m := range testOnlyModules {
				if strings.HasPrefix(dep, m) {
					t.Errorf("%s links %s, of a module only tests may import", bin, dep)
				}
			}
		}
		if bin == devBinary {
			for _, p := range devPackages {
				if !slices.Contains(deps, p) {
					t.Errorf("%s does not depend on %s: the check no longer sees it", bin, p)
				}
			}
			continue
		}
		links := slices.Contains(deps, demoPackage)
		switch {
		case bin == allInOne && !links:
			t.Errorf("%s does not depend on %s: the check no longer sees it", bin, demoPackage)
		case bin != allInOne && links:
			t.Errorf("role binary %s links the demo Skill Service (%s); pass it in from cmd/%s instead", bin, demoPackage, allInOne)
		}
		for _, dep := range deps {
			if slices.Contains(devPackages, dep) {
				t.Errorf("%s links %s, which only cmd/%s may", bin, dep, devBinary)
			}
			for _, m := range devOnlyModules {
				if strings.HasPrefix(dep, m) {
					t.Errorf("%s links %s, of a module only the development module (cmd/dev) may require", bin, dep)
				}
			}
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
