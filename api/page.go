package api

import (
	"bytes"
	"fmt"
	"html/template"
	"regexp"
	"slices"
	"strings"
	"sync"

	json "github.com/go-json-experiment/json/v1"
)

// Page returns the reference page: the document rendered as one HTML page
// (no script, no style, nothing fetched from elsewhere), rendered once.
var Page = sync.OnceValues(func() ([]byte, error) {
	raw, err := JSON()
	if err != nil {
		return nil, err
	}
	return render(raw)
})

// A document as the page reads it.
type document struct {
	Info struct {
		Title       string `json:"title"`
		Version     string `json:"version"`
		Summary     string `json:"summary"`
		Description string `json:"description"`
	} `json:"info"`
	Tags []struct {
		Name        string `json:"name"`
		Description string `json:"description"`
	} `json:"tags"`
	Paths      map[string]map[string]operation `json:"paths"`
	Common     map[string][]string             `json:"x-common-error-codes"`
	Components struct {
		SecuritySchemes map[string]map[string]any `json:"securitySchemes"`
		Parameters      map[string]parameter      `json:"parameters"`
		Schemas         map[string]map[string]any `json:"schemas"`
	} `json:"components"`
}

type operation struct {
	OperationID string              `json:"operationId"`
	Tags        []string            `json:"tags"`
	Summary     string              `json:"summary"`
	Description string              `json:"description"`
	Security    []map[string]any    `json:"security"`
	Parameters  []parameter         `json:"parameters"`
	RequestBody *body               `json:"requestBody"`
	Responses   map[string]body     `json:"responses"`
	ErrorCodes  map[string][]string `json:"x-error-codes"`
}

type parameter struct {
	Ref         string         `json:"$ref"`
	Name        string         `json:"name"`
	In          string         `json:"in"`
	Required    bool           `json:"required"`
	Description string         `json:"description"`
	Schema      map[string]any `json:"schema"`
}

type body struct {
	Ref         string                    `json:"$ref"`
	Description string                    `json:"description"`
	Required    bool                      `json:"required"`
	Content     map[string]map[string]any `json:"content"`
}

// Views of the page.
type (
	pageView struct {
		document
		Sections []section
		Schemas  []schemaView
		Security []securityView
	}
	section struct {
		Name, Description string
		Ops               []opView
	}
	opView struct {
		ID, Method, Path, Summary, Description string
		Public                                 bool
		Params                                 []parameter
		Request                                []contentView
		Responses                              []responseView
	}
	contentView struct {
		MediaType string
		Schema    template.HTML
	}
	responseView struct {
		Status, Description string
		Content             []contentView
		Codes               []string
	}
	schemaView struct {
		Name, Description string
		Type              template.HTML
		Props             []propView
	}
	propView struct {
		Name, Description string
		Type              template.HTML
		Required          bool
	}
	securityView struct {
		Name, Scheme, Format, Description string
	}
)

var methods = []string{"get", "put", "post", "patch", "delete"}

func render(raw []byte) ([]byte, error) {
	var d document
	if err := json.Unmarshal(raw, &d); err != nil {
		return nil, fmt.Errorf("api: read the document: %w", err)
	}
	v := pageView{document: d}
	byTag := map[string]*section{}
	for _, t := range d.Tags {
		v.Sections = append(v.Sections, section{Name: t.Name, Description: t.Description})
	}
	for i := range v.Sections {
		byTag[v.Sections[i].Name] = &v.Sections[i]
	}
	paths := make([]string, 0, len(d.Paths))
	for p := range d.Paths {
		paths = append(paths, p)
	}
	slices.Sort(paths)
	for _, p := range paths {
		for _, m := range methods {
			op, ok := d.Paths[p][m]
			if !ok {
				continue
			}
			tag := "Other"
			if len(op.Tags) > 0 {
				tag = op.Tags[0]
			}
			s := byTag[tag]
			if s == nil {
				v.Sections = append(v.Sections, section{Name: tag})
				s = &v.Sections[len(v.Sections)-1]
				byTag[tag] = s
			}
			s.Ops = append(s.Ops, d.opView(p, m, op))
		}
	}
	for name, s := range d.Components.SecuritySchemes {
		v.Security = append(v.Security, securityView{Name: name, Scheme: str(s["scheme"]), Format: str(s["bearerFormat"]),
			Description: str(s["description"])})
	}
	slices.SortFunc(v.Security, func(a, b securityView) int { return strings.Compare(a.Name, b.Name) })
	names := make([]string, 0, len(d.Components.Schemas))
	for n := range d.Components.Schemas {
		names = append(names, n)
	}
	slices.Sort(names)
	for _, n := range names {
		v.Schemas = append(v.Schemas, schemaOf(n, d.Components.Schemas[n]))
	}
	var buf bytes.Buffer
	if err := pageTemplate.Execute(&buf, v); err != nil {
		return nil, fmt.Errorf("api: render the page: %w", err)
	}
	return buf.Bytes(), nil
}

func (d document) opView(path, method string, op operation) opView {
	o := opView{ID: op.OperationID, Method: strings.ToUpper(method), Path: path, Summary: op.Summary,
		Description: op.Description, Public: len(op.Security) == 1 && len(op.Security[0]) == 0}
	for _, p := range op.Parameters {
		if name, ok := strings.CutPrefix(p.Ref, "#/components/parameters/"); ok {
			p = d.Components.Parameters[name]
		}
		o.Params = append(o.Params, p)
	}
	if op.RequestBody != nil {
		o.Request = contents(op.RequestBody.Content)
	}
	statuses := make([]string, 0, len(op.Responses))
	for s := range op.Responses {
		statuses = append(statuses, s)
	}
	slices.Sort(statuses)
	for _, s := range statuses {
		r := op.Responses[s]
		rv := responseView{Status: s, Description: r.Description, Content: contents(r.Content), Codes: op.ErrorCodes[s]}
		if r.Ref != "" {
			rv.Description = "an error"
			rv.Content = []contentView{{MediaType: "application/json", Schema: link("Error")}}
		}
		if !o.Public {
			rv.Codes = slices.Clone(rv.Codes)
			for _, c := range d.Common[s] {
				if !slices.Contains(rv.Codes, c) {
					rv.Codes = append(rv.Codes, c)
				}
			}
		}
		o.Responses = append(o.Responses, rv)
	}
	for s, codes := range d.Common {
		if _, ok := op.Responses[s]; !ok && !o.Public {
			o.Responses = append(o.Responses, responseView{Status: s, Description: "an error (every authenticated operation)",
				Content: []contentView{{MediaType: "application/json", Schema: link("Error")}}, Codes: codes})
		}
	}
	slices.SortFunc(o.Responses, func(a, b responseView) int { return strings.Compare(a.Status, b.Status) })
	return o
}

func contents(c map[string]map[string]any) []contentView {
	types := make([]string, 0, len(c))
	for t := range c {
		types = append(types, t)
	}
	slices.Sort(types)
	out := make([]contentView, 0, len(types))
	for _, t := range types {
		s, _ := c[t]["schema"].(map[string]any)
		out = append(out, contentView{MediaType: t, Schema: typeOf(s)})
	}
	return out
}

func schemaOf(name string, s map[string]any) schemaView {
	v := schemaView{Name: name, Description: str(s["description"]), Type: typeOf(s)}
	props, _ := s["properties"].(map[string]any)
	req, _ := s["required"].([]any)
	keys := make([]string, 0, len(props))
	for k := range props {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		p, _ := props[k].(map[string]any)
		v.Props = append(v.Props, propView{Name: k, Description: str(p["description"]), Type: typeOf(p),
			Required: slices.Contains(req, any(k))})
	}
	return v
}

// typeOf spells a schema's type in short, with links to components.
func typeOf(s map[string]any) template.HTML {
	if s == nil {
		return "any"
	}
	if ref, ok := s["$ref"].(string); ok {
		return link(strings.TrimPrefix(ref, "#/components/schemas/"))
	}
	for _, k := range []string{"allOf", "anyOf", "oneOf"} {
		if alts, ok := s[k].([]any); ok && len(alts) > 0 {
			parts := make([]string, 0, len(alts))
			for _, a := range alts {
				m, _ := a.(map[string]any)
				parts = append(parts, string(typeOf(m)))
			}
			sep := " | "
			if k == "allOf" {
				sep = " &amp; "
			}
			return template.HTML(strings.Join(parts, sep))
		}
	}
	if c, ok := s["const"]; ok {
		b, _ := json.Marshal(c)
		return template.HTML("<code>" + template.HTMLEscapeString(string(b)) + "</code>")
	}
	if e, ok := s["enum"].([]any); ok {
		parts := make([]string, 0, len(e))
		for _, x := range e {
			parts = append(parts, "<code>"+template.HTMLEscapeString(fmt.Sprint(x))+"</code>")
		}
		return template.HTML(strings.Join(parts, " | "))
	}
	var types []string
	switch t := s["type"].(type) {
	case string:
		types = []string{t}
	case []any:
		for _, x := range t {
			types = append(types, str(x))
		}
	}
	if len(types) == 0 {
		return "any"
	}
	out := make([]string, 0, len(types))
	for _, t := range types {
		switch t {
		case "array":
			items, _ := s["items"].(map[string]any)
			out = append(out, "array of "+string(typeOf(items)))
		case "object":
			if ap, ok := s["additionalProperties"].(map[string]any); ok {
				out = append(out, "map of "+string(typeOf(ap)))
			} else {
				out = append(out, "object")
			}
		case "string":
			if f := str(s["format"]); f != "" {
				t += " (" + template.HTMLEscapeString(f) + ")"
			}
			out = append(out, t)
		default:
			out = append(out, template.HTMLEscapeString(t))
		}
	}
	return template.HTML(strings.Join(out, " | "))
}

func link(name string) template.HTML {
	n := template.HTMLEscapeString(name)
	return template.HTML(`<a href="#schema-` + n + `">` + n + `</a>`)
}

func str(v any) string { s, _ := v.(string); return s }

var (
	codeSpan = regexp.MustCompile("`([^`]+)`")
	boldSpan = regexp.MustCompile(`\*\*([^*]+)\*\*`)
)

// prose renders a description: paragraphs at blank lines, `code` spans,
// **bold** leads; everything else escaped.
func prose(s string) template.HTML {
	var b strings.Builder
	for para := range strings.SplitSeq(strings.TrimSpace(s), "\n\n") {
		p := template.HTMLEscapeString(strings.Join(strings.Fields(para), " "))
		p = codeSpan.ReplaceAllString(p, "<code>$1</code>")
		p = boldSpan.ReplaceAllString(p, "<strong>$1</strong>")
		b.WriteString("<p>" + p + "</p>")
	}
	return template.HTML(b.String())
}

var pageTemplate = template.Must(template.New("page").Funcs(template.FuncMap{"prose": prose}).Parse(`<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{{.Info.Title}}</title>
</head>
<body>
<header>
<h1>{{.Info.Title}} <small>version {{.Info.Version}}</small></h1>
<p>{{.Info.Summary}}</p>
<p>The machine-readable document: <a href="/openapi.json">/openapi.json</a> (OpenAPI 3.1).</p>
</header>
<nav>
<h2>Contents</h2>
<ul>
<li><a href="#authentication">Authentication</a></li>
{{range .Sections}}<li><a href="#tag-{{.Name}}">{{.Name}}</a><ul>
{{range .Ops}}<li><a href="#op-{{.ID}}"><code>{{.Method}} {{.Path}}</code></a> {{.Summary}}</li>
{{end}}</ul></li>
{{end}}<li><a href="#schemas">Schemas</a></li>
</ul>
</nav>
<main>
{{prose .Info.Description}}
<section id="authentication">
<h2>Authentication</h2>
<p>Each is sent as <code>Authorization: Bearer &lt;credential&gt;</code>; an open ingress (loopback development) needs none.</p>
<dl>
{{range .Security}}<dt><code>{{.Name}}</code> ({{.Scheme}}{{if .Format}}, {{.Format}}{{end}})</dt><dd>{{prose .Description}}</dd>
{{end}}</dl>
</section>
{{range .Sections}}<section id="tag-{{.Name}}">
<h2>{{.Name}}</h2>
<p>{{.Description}}</p>
{{range .Ops}}<article id="op-{{.ID}}">
<h3><code>{{.Method}} {{.Path}}</code></h3>
<p><strong>{{.Summary}}</strong>{{if .Public}} (not authenticated){{end}}</p>
{{prose .Description}}
{{if .Params}}<h4>Parameters</h4>
<table>
<thead><tr><th>name</th><th>in</th><th>required</th><th>description</th></tr></thead>
<tbody>
{{range .Params}}<tr><td><code>{{.Name}}</code></td><td>{{.In}}</td><td>{{if .Required}}yes{{end}}</td><td>{{prose .Description}}</td></tr>
{{end}}</tbody>
</table>
{{end}}{{if .Request}}<h4>Request body</h4>
<ul>{{range .Request}}<li><code>{{.MediaType}}</code>: {{.Schema}}</li>{{end}}</ul>
{{end}}<h4>Responses</h4>
<table>
<thead><tr><th>status</th><th>description</th><th>body</th><th>error codes</th></tr></thead>
<tbody>
{{range .Responses}}<tr><td>{{.Status}}</td><td>{{.Description}}</td><td>{{range .Content}}<code>{{.MediaType}}</code>: {{.Schema}}<br>{{end}}</td><td>{{range .Codes}}<code>{{.}}</code> {{end}}</td></tr>
{{end}}</tbody>
</table>
</article>
{{end}}</section>
{{end}}<section id="schemas">
<h2>Schemas</h2>
{{range .Schemas}}<article id="schema-{{.Name}}">
<h3>{{.Name}}</h3>
{{prose .Description}}
<p>Type: {{.Type}}</p>
{{if .Props}}<table>
<thead><tr><th>property</th><th>type</th><th>required</th><th>description</th></tr></thead>
<tbody>
{{range .Props}}<tr><td><code>{{.Name}}</code></td><td>{{.Type}}</td><td>{{if .Required}}yes{{end}}</td><td>{{prose .Description}}</td></tr>
{{end}}</tbody>
</table>
{{end}}</article>
{{end}}</section>
</main>
</body>
</html>
`))
