package layering

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"

	json "github.com/go-json-experiment/json/v1"
)

// Module is the path of agentbus's module; the graph and the table name
// packages relative to it.
const Module = "github.com/agentbus/agentbus"

// Rules are the allowed imports by package. A package pattern is a path
// ("store"), a subtree ("llm/..." is llm and every package below it) or
// "*" (any package of the module).
type Rules struct {
	rows []row
}

type row struct {
	packages []string
	allowed  []string
}

// ErrNoTable is the failure to find the package table.
var ErrNoTable = errors.New("layering: no table with a \"package\" and a \"may import\" column")

// ParseTable reads the rules from the first Markdown table of md whose
// header has a "package" column and a "may import" column. A cell lists
// patterns in backquotes, separated by commas; "—" or an empty cell
// allows nothing.
func ParseTable(md []byte) (Rules, error) {
	var r Rules
	pkgCol, allowCol := -1, -1
	sc := bufio.NewScanner(bytes.NewReader(md))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if !strings.HasPrefix(line, "|") {
			if pkgCol >= 0 && len(r.rows) > 0 {
				break // the table ended
			}
			pkgCol, allowCol = -1, -1
			continue
		}
		cells := splitRow(line)
		if pkgCol < 0 {
			for i, c := range cells {
				switch strings.ToLower(c) {
				case "package", "packages":
					pkgCol = i
				case "may import":
					allowCol = i
				}
			}
			if allowCol < 0 {
				pkgCol = -1
			}
			continue
		}
		if strings.HasPrefix(cells[0], "---") || max(pkgCol, allowCol) >= len(cells) {
			continue
		}
		pkgs := quoted(cells[pkgCol])
		if len(pkgs) == 0 {
			return r, fmt.Errorf("layering: table row %q names no package", line)
		}
		r.rows = append(r.rows, row{packages: pkgs, allowed: quoted(cells[allowCol])})
	}
	if len(r.rows) == 0 {
		return r, ErrNoTable
	}
	return r, nil
}

// splitRow splits a Markdown table row into its trimmed cells.
func splitRow(line string) []string {
	line = strings.TrimSuffix(strings.TrimPrefix(line, "|"), "|")
	cells := strings.Split(line, "|")
	for i := range cells {
		cells[i] = strings.TrimSpace(cells[i])
	}
	return cells
}

// quoted returns the backquoted words of a cell.
func quoted(cell string) []string {
	var out []string
	for i, part := range strings.Split(cell, "`") {
		if i%2 == 1 && part != "" {
			out = append(out, part)
		}
	}
	return out
}

// match reports whether pkg matches pattern.
func match(pattern, pkg string) bool {
	if pattern == "*" {
		return true
	}
	if root, ok := strings.CutSuffix(pattern, "/..."); ok {
		return pkg == root || strings.HasPrefix(pkg, root+"/")
	}
	return pkg == pattern
}

// rowOf returns the row that governs pkg: of the rows naming it, the one
// with the most specific pattern (an exact path over a subtree, a longer
// subtree over a shorter one).
func (r Rules) rowOf(pkg string) (row, bool) {
	best, score := row{}, -1
	for _, rw := range r.rows {
		for _, p := range rw.packages {
			if !match(p, pkg) {
				continue
			}
			s := len(p)
			if !strings.HasSuffix(p, "/...") && p != "*" {
				s += 1 << 16 // an exact path beats every pattern
			}
			if s > score {
				best, score = rw, s
			}
		}
	}
	return best, score >= 0
}

// Check returns every violation of the rules in graph (package → the
// module packages it imports, both relative to Module), sorted: an
// import no pattern of the package's row allows, or a package no row
// names.
func (r Rules) Check(graph map[string][]string) []string {
	var out []string
	for pkg, imports := range graph {
		rw, ok := r.rowOf(pkg)
		if !ok {
			out = append(out, fmt.Sprintf("%s: not in the package table", pkg))
			continue
		}
		for _, imp := range imports {
			if !slices.ContainsFunc(rw.allowed, func(p string) bool { return match(p, imp) }) {
				out = append(out, fmt.Sprintf("%s imports %s, which its row does not allow", pkg, imp))
			}
		}
	}
	slices.Sort(out)
	return out
}

// pkg is what `go list` reports of one package.
type pkg struct {
	ImportPath string
	Dir        string
	GoFiles    []string
	Imports    []string
	Error      *struct{ Err string }
}

// list runs `go list` on the module rooted at dir and returns its own
// packages, by path relative to Module.
func list(ctx context.Context, dir string) (map[string]pkg, error) {
	cmd := exec.CommandContext(ctx, "go", "list", "-e", "-json=ImportPath,Dir,GoFiles,Imports,Error", "./...")
	cmd.Dir = dir
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("layering: go list: %w: %s", err, stderr.String())
	}
	pkgs := map[string]pkg{}
	dec := json.NewDecoder(bytes.NewReader(out))
	for dec.More() {
		var p pkg
		if err := dec.Decode(&p); err != nil {
			return nil, fmt.Errorf("layering: go list output: %w", err)
		}
		if p.Error != nil {
			return nil, fmt.Errorf("layering: %s: %s", p.ImportPath, p.Error.Err)
		}
		if rel, ok := relative(p.ImportPath); ok {
			pkgs[rel] = p
		}
	}
	return pkgs, nil
}

// Graph returns the non-test import graph of the module rooted at dir,
// limited to the module's own packages and relative to Module, as
// `go list` reports it.
func Graph(ctx context.Context, dir string) (map[string][]string, error) {
	pkgs, err := list(ctx, dir)
	if err != nil {
		return nil, err
	}
	graph := make(map[string][]string, len(pkgs))
	for rel, p := range pkgs {
		imports := []string{}
		for _, imp := range p.Imports {
			if r, ok := relative(imp); ok {
				imports = append(imports, r)
			}
		}
		graph[rel] = imports
	}
	return graph, nil
}

// Sizes returns the number of lines of every package of the module rooted
// at dir, over its non-test Go files, by package relative to Module.
func Sizes(ctx context.Context, dir string) (map[string]int, error) {
	pkgs, err := list(ctx, dir)
	if err != nil {
		return nil, err
	}
	sizes := make(map[string]int, len(pkgs))
	for rel, p := range pkgs {
		for _, f := range p.GoFiles {
			b, err := os.ReadFile(filepath.Join(p.Dir, f))
			if err != nil {
				return nil, fmt.Errorf("layering: %w", err)
			}
			sizes[rel] += bytes.Count(b, []byte("\n"))
		}
	}
	return sizes, nil
}

// relative returns path relative to Module, if it is one of its
// packages.
func relative(path string) (string, bool) {
	if path == Module {
		return ".", true
	}
	return strings.CutPrefix(path, Module+"/")
}
