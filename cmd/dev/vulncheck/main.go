package main

import (
	"bufio"
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"sort"
	"strings"

	json "github.com/go-json-experiment/json/v1"
)

func main() {
	db := flag.String("db", "", "vulnerability database URL (file:///… from deploy/vulndb/setup.sh)")
	allowFile := flag.String("allow", "", "file of allowed advisories: an id and its reason a line")
	dir := flag.String("C", ".", "directory to scan from (the module root)")
	flag.Parse()
	if *db == "" {
		fmt.Fprintln(os.Stderr, "vulncheck: -db is required")
		os.Exit(2)
	}
	allowed := map[string]string{}
	if *allowFile != "" {
		b, err := os.ReadFile(*allowFile)
		if err == nil {
			allowed, err = parseAllow(b)
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, "vulncheck:", err)
			os.Exit(2)
		}
	}
	pkgs := flag.Args()
	if len(pkgs) == 0 {
		pkgs = []string{"./..."}
	}
	args := append([]string{"tool", "govulncheck", "-C", *dir, "-db", *db, "-format", "json"}, pkgs...)
	var out bytes.Buffer
	cmd := exec.Command("go", args...)
	cmd.Stdout, cmd.Stderr = &out, os.Stderr
	if err := cmd.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "vulncheck: govulncheck:", err)
		os.Exit(2)
	}
	r, err := readReport(&out)
	if err != nil {
		fmt.Fprintln(os.Stderr, "vulncheck:", err)
		os.Exit(2)
	}
	if !r.judge(os.Stdout, allowed) {
		os.Exit(1)
	}
}

// finding is one advisory that applies, at the deepest level found.
type finding struct {
	id, summary     string
	module, version string
	fixed           string
	called          bool   // a vulnerable symbol is reachable from the code
	trace           string // for a called one: the first frame in the code
}

// report is govulncheck's findings, one per advisory.
type report struct {
	goVersion string
	findings  map[string]*finding
}

// message is the part of govulncheck's JSON stream (its protocol v1.0.0)
// that vulncheck reads.
type message struct {
	Config *struct {
		GoVersion string `json:"go_version"`
	} `json:"config"`
	OSV *struct {
		ID      string `json:"id"`
		Summary string `json:"summary"`
	} `json:"osv"`
	Finding *struct {
		OSV          string  `json:"osv"`
		FixedVersion string  `json:"fixed_version"`
		Trace        []frame `json:"trace"`
	} `json:"finding"`
}

type frame struct {
	Module   string `json:"module"`
	Version  string `json:"version"`
	Package  string `json:"package"`
	Function string `json:"function"`
	Receiver string `json:"receiver"`
	Position *struct {
		Filename string `json:"filename"`
		Line     int    `json:"line"`
	} `json:"position"`
}

// readReport decodes govulncheck's JSON stream.
func readReport(r io.Reader) (*report, error) {
	rep := &report{findings: map[string]*finding{}}
	summaries := map[string]string{}
	dec := json.NewDecoder(r)
	sawConfig := false
	for {
		var m message
		if err := dec.Decode(&m); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			return nil, fmt.Errorf("reading govulncheck's output: %w", err)
		}
		switch {
		case m.Config != nil:
			sawConfig, rep.goVersion = true, m.Config.GoVersion
		case m.OSV != nil:
			summaries[m.OSV.ID] = m.OSV.Summary
		case m.Finding != nil && len(m.Finding.Trace) > 0:
			rep.add(m.Finding.OSV, m.Finding.FixedVersion, m.Finding.Trace)
		}
	}
	if !sawConfig {
		return nil, errors.New("govulncheck's output has no config message")
	}
	for id, f := range rep.findings {
		f.summary = summaries[id]
	}
	return rep, nil
}

// add records one finding of advisory id; a called one wins over an
// imported or required one.
func (r *report) add(id, fixed string, trace []frame) {
	f := r.findings[id]
	if f == nil {
		f = &finding{id: id, module: trace[0].Module, version: trace[0].Version, fixed: fixed}
		r.findings[id] = f
	}
	if f.fixed == "" {
		f.fixed = fixed
	}
	if trace[0].Function == "" || f.called {
		return
	}
	f.called = true
	// Frames run from the vulnerable symbol to the entry point: show the
	// first one outside the vulnerable module, where the code calls in.
	for _, fr := range trace {
		if fr.Module == trace[0].Module || fr.Position == nil || fr.Position.Line == 0 {
			continue
		}
		name := fr.Function
		if fr.Receiver != "" {
			name = "(" + fr.Receiver + ")." + name
		}
		f.trace = fmt.Sprintf("%s:%d %s.%s", fr.Position.Filename, fr.Position.Line, fr.Package, name)
		return
	}
}

// judge prints the findings to w and reports whether they pass: no called
// advisory outside allowed, and every allowed one still found.
func (r *report) judge(w io.Writer, allowed map[string]string) bool {
	ids := make([]string, 0, len(r.findings))
	for id := range r.findings {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	ok := true
	var called, allowedCalled, notCalled int
	for _, id := range ids {
		f := r.findings[id]
		fixed := f.fixed
		if fixed == "" {
			fixed = "no fixed version"
		}
		switch _, isAllowed := allowed[id]; {
		case !f.called:
			notCalled++
			fmt.Fprintf(w, "note: %s in %s@%s (fixed: %s) is required but not called: %s\n", id, f.module, f.version, fixed, f.summary)
		case isAllowed:
			allowedCalled++
			fmt.Fprintf(w, "allowed: %s in %s@%s (%s), called at %s: %s\n", id, f.module, f.version, fixed, f.trace, allowed[id])
		default:
			called++
			ok = false
			fmt.Fprintf(w, "VULNERABLE: %s in %s@%s (fixed: %s), called at %s: %s\n", id, f.module, f.version, fixed, f.trace, f.summary)
		}
	}
	var stale []string
	for id := range allowed {
		if f := r.findings[id]; f == nil || !f.called {
			stale = append(stale, id)
		}
	}
	sort.Strings(stale)
	for _, id := range stale {
		ok = false
		fmt.Fprintf(w, "STALE: %s is in the allow list but no longer called: remove it\n", id)
	}
	fmt.Fprintf(w, "govulncheck (%s): %d called vulnerabilities, %d allowed, %d required but not called\n",
		r.goVersion, called, allowedCalled, notCalled)
	return ok
}

// parseAllow reads an allow list: an advisory id and its reason a line.
func parseAllow(b []byte) (map[string]string, error) {
	allowed := map[string]string{}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for n := 1; sc.Scan(); n++ {
		line, _, _ := strings.Cut(sc.Text(), "#")
		id, reason, _ := strings.Cut(strings.TrimSpace(line), " ")
		switch reason = strings.TrimSpace(reason); {
		case id == "":
			continue
		case !strings.HasPrefix(id, "GO-"):
			return nil, fmt.Errorf("allow list line %d: %q is not an advisory id (GO-YYYY-NNNN)", n, id)
		case reason == "":
			return nil, fmt.Errorf("allow list line %d: %s has no reason", n, id)
		}
		allowed[id] = reason
	}
	return allowed, sc.Err()
}
