package app

import (
	"bytes"
	"flag"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite docs/CONFIGURATION.md from the declared variables")

// configDoc is docs/CONFIGURATION.md, from this package's directory.
var configDoc = filepath.Join("..", "..", "..", "docs", "CONFIGURATION.md")

// TestConfigurationDoc: docs/CONFIGURATION.md is what the declared
// variables generate. go test ./cmd/internal/app -run TestConfigurationDoc
// -update rewrites it.
func TestConfigurationDoc(t *testing.T) {
	want := ConfigurationDoc()
	if *update {
		if err := os.WriteFile(configDoc, want, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	got, err := os.ReadFile(configDoc)
	if err != nil {
		t.Fatalf("%v: generate it with go test ./cmd/internal/app -run TestConfigurationDoc -update", err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("%s is stale: regenerate it with go test ./cmd/internal/app -run TestConfigurationDoc -update", configDoc)
	}
}

// TestConfigurationDocListsEveryVariable: each declared variable has a
// row with its flag, default and form, and each section an introduction.
func TestConfigurationDocListsEveryVariable(t *testing.T) {
	doc := string(ConfigurationDoc())
	for _, v := range Vars() {
		row := "| `" + v.Name + "` | "
		if v.Flag != "" {
			row += "`--" + v.Flag + "`"
		}
		if !strings.Contains(doc, row) || v.Form == "" || v.Usage == "" {
			t.Errorf("%s: no row %q, or no form or meaning", v.Name, row)
		}
		if sectionIntro[v.Section] == "" {
			t.Errorf("%s: section %q has no introduction", v.Name, v.Section)
		}
		if v.Secret && v.Default != "" && v.Name != "MODEL_API_KEY" {
			t.Errorf("secret %s has a default", v.Name)
		}
	}
	if n := len(Vars()); n < 90 {
		t.Errorf("%d variables declared; agentbus reads more than 90", n)
	}
}

// TestOnlyTheRegistryReadsTheEnvironment: no Go code of the module but
// env.go reads an environment variable, so every variable a process reads
// is declared, parsed strictly and documented. skills passes a few of the
// base environment's variables (PATH, HOME, …) on to a stdio server,
// which is not configuration.
func TestOnlyTheRegistryReadsTheEnvironment(t *testing.T) {
	root := filepath.Join("..", "..", "..")
	allowed := []string{filepath.Join("cmd", "internal", "app", "env.go"), filepath.Join("skills", "transports.go")}
	fset := token.NewFileSet()
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		name := d.Name()
		if d.IsDir() {
			if path != root && (strings.HasPrefix(name, ".") || name == "testdata" || name == "node_modules") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(name, ".go") || strings.HasSuffix(name, "_test.go") {
			return nil
		}
		rel, _ := filepath.Rel(root, path)
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		ast.Inspect(f, func(n ast.Node) bool {
			sel, ok := n.(*ast.SelectorExpr)
			if !ok {
				return true
			}
			if x, ok := sel.X.(*ast.Ident); ok && x.Name == "os" && (sel.Sel.Name == "Getenv" || sel.Sel.Name == "LookupEnv") &&
				!slices.Contains(allowed, rel) {
				t.Errorf("%s: os.%s: declare the variable in cmd/internal/app/vars.go and read it there",
					fset.Position(sel.Pos()), sel.Sel.Name)
			}
			return true
		})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
