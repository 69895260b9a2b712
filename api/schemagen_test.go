package api_test

import (
	"bytes"
	"errors"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"time"

	json "github.com/go-json-experiment/json/v1"
	"go.yaml.in/yaml/v4"

	"github.com/agentbus/agentbus/store"
)

// The generator of the document's component schemas from the Go wire
// types (TestWireSchemas): a JSON Schema (2020-12, as OpenAPI 3.1 speaks
// it) for each type, following encoding/json's rules: a field's name is
// its json tag's, embedded structs are flattened, "-" is left out; a
// field without omitempty (or omitzero) is always present, so it is
// required in an answer, and a nil slice, map or pointer is written as
// null. Doc comments become descriptions.

type direction int

const (
	output      direction = iota // an answer: fields always present are required
	input                        // a request decoded leniently
	strictInput                  // a request whose unknown fields are refused
)

type wireRoot struct {
	name string
	t    reflect.Type
	dir  direction
}

// obj is a YAML mapping that keeps its keys in order.
type obj []kv

type kv struct {
	k string
	v any
}

func (o obj) MarshalYAML() (any, error) {
	n := &yaml.Node{Kind: yaml.MappingNode}
	for _, e := range o {
		var v yaml.Node
		if err := v.Encode(e.v); err != nil {
			return nil, err
		}
		n.Content = append(n.Content, &yaml.Node{Kind: yaml.ScalarNode, Value: e.k}, &v)
	}
	return n, nil
}

type generator struct {
	names    map[reflect.Type]string
	dirs     map[reflect.Type]direction
	storeIdx map[reflect.Type]string
	comps    map[string]obj
	docs     map[string]string // "pkgpath.Type" and "pkgpath.Type.Field" to their doc comments
	parsed   map[string]bool
}

const modulePath = "github.com/agentbus/agentbus"

// generateSchemas returns the component schemas of roots and every type
// they reach, by name, in name order.
func generateSchemas(roots []wireRoot, storeDocs map[reflect.Type]string) ([]kv, error) {
	g := &generator{names: map[reflect.Type]string{}, dirs: map[reflect.Type]direction{}, storeIdx: storeDocs,
		comps: map[string]obj{}, docs: map[string]string{}, parsed: map[string]bool{}}
	for _, r := range roots {
		g.names[r.t] = r.name
	}
	// A type any request reaches is read as a request wherever it appears:
	// no field of it is required, and a strict one admits no other field.
	for _, r := range roots {
		if r.dir != output {
			g.markInputs(r.t, r.dir, map[reflect.Type]bool{})
		}
	}
	for _, r := range roots {
		if _, err := g.ref(r.t); err != nil {
			return nil, err
		}
	}
	names := make([]string, 0, len(g.comps))
	for n := range g.comps {
		names = append(names, n)
	}
	slices.Sort(names)
	out := make([]kv, 0, len(names))
	for _, n := range names {
		out = append(out, kv{n, g.comps[n]})
	}
	return out, nil
}

func (g *generator) markInputs(t reflect.Type, dir direction, seen map[reflect.Type]bool) {
	if seen[t] {
		return
	}
	seen[t] = true
	switch t.Kind() {
	case reflect.Pointer, reflect.Slice, reflect.Array, reflect.Map:
		g.markInputs(t.Elem(), dir, seen)
	case reflect.Struct:
		if t.Name() != "" && g.dirs[t] < dir {
			g.dirs[t] = dir
		}
		for i := range t.NumField() {
			g.markInputs(t.Field(i).Type, dir, seen)
		}
	}
}

// named says whether t gets a component of its own.
func named(t reflect.Type) bool {
	return t.Name() != "" && strings.HasPrefix(t.PkgPath(), modulePath) &&
		(t.Kind() == reflect.Struct || t.Kind() == reflect.Map || t.Kind() == reflect.Slice)
}

func (g *generator) nameOf(t reflect.Type) string {
	if n, ok := g.names[t]; ok {
		return n
	}
	pkg := filepath.Base(t.PkgPath())
	n := t.Name()
	if prefix := strings.ToUpper(pkg[:1]) + pkg[1:]; !strings.HasPrefix(n, prefix) {
		n = prefix + n
	}
	g.names[t] = n
	return n
}

// ref is the schema of t where it is used.
func (g *generator) ref(t reflect.Type) (obj, error) {
	if idx, ok := g.storeIdx[t]; ok {
		name := g.nameOf(t)
		if _, done := g.comps[name]; !done {
			s, err := storeSchema(idx)
			if err != nil {
				return nil, err
			}
			g.comps[name] = s
		}
		return obj{{"$ref", "#/components/schemas/" + name}}, nil
	}
	if !named(t) {
		return g.schema(t)
	}
	name := g.nameOf(t)
	if _, done := g.comps[name]; !done {
		g.comps[name] = nil // taken: a recursive type refers to itself
		s, err := g.schema(t)
		if err != nil {
			return nil, err
		}
		if d := g.doc(t.PkgPath(), t.Name()); d != "" {
			s = append(obj{{"description", d}}, s...)
		}
		g.comps[name] = append(s, kv{"x-go-type", t.String()})
	}
	return obj{{"$ref", "#/components/schemas/" + name}}, nil
}

// schema is t's schema, spelled out.
func (g *generator) schema(t reflect.Type) (obj, error) {
	switch {
	case t == reflect.TypeFor[time.Time]():
		return obj{{"type", "string"}, {"format", "date-time"}}, nil
	case isRaw(t):
		return obj{{"description", "any JSON value"}, {"type", anyJSON}}, nil
	case t.Kind() == reflect.Slice && t.Elem().Kind() == reflect.Uint8:
		return obj{{"type", "string"}, {"contentEncoding", "base64"}}, nil
	}
	switch t.Kind() {
	case reflect.String:
		return obj{{"type", "string"}}, nil
	case reflect.Bool:
		return obj{{"type", "boolean"}}, nil
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return obj{{"type", "integer"}}, nil
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return obj{{"type", "integer"}, {"minimum", 0}}, nil
	case reflect.Float32, reflect.Float64:
		return obj{{"type", "number"}}, nil
	case reflect.Interface:
		return obj{{"type", anyJSON}}, nil
	case reflect.Pointer:
		return g.ref(t.Elem())
	case reflect.Slice, reflect.Array:
		items, err := g.ref(t.Elem())
		if err != nil {
			return nil, err
		}
		return obj{{"type", "array"}, {"items", items}}, nil
	case reflect.Map:
		vals, err := g.ref(t.Elem())
		if err != nil {
			return nil, err
		}
		return obj{{"type", "object"}, {"additionalProperties", vals}}, nil
	case reflect.Struct:
		return g.object(t)
	}
	return nil, fmt.Errorf("api: no schema for %s (%s)", t, t.Kind())
}

// isRaw says whether t is raw JSON (json.RawMessage, which is
// jsontext.Value or encoding/json's, by Go release).
func isRaw(t reflect.Type) bool {
	return t == reflect.TypeFor[json.RawMessage]() || t.Name() == "RawMessage"
}

// anyJSON is the type of any JSON value, spelled out: kin-openapi's
// validator takes an empty schema ({}) as refusing null.
var anyJSON = []string{"string", "number", "boolean", "object", "array", "null"}

// field is one JSON member of a struct.
type field struct {
	name     string
	sf       reflect.StructField
	owner    reflect.Type
	optional bool
}

// fields are t's JSON members, embedded structs flattened.
func fields(t reflect.Type) []field {
	var out []field
	for i := range t.NumField() {
		sf := t.Field(i)
		tag := sf.Tag.Get("json")
		if tag == "-" {
			continue
		}
		name, opts, _ := strings.Cut(tag, ",")
		ft := sf.Type
		if ft.Kind() == reflect.Pointer {
			ft = ft.Elem()
		}
		if sf.Anonymous && name == "" && ft.Kind() == reflect.Struct {
			out = append(out, fields(ft)...)
			continue
		}
		if !sf.IsExported() {
			continue
		}
		if name == "" {
			name = sf.Name
		}
		omitempty := strings.Contains(","+opts+",", ",omitempty,") && sf.Type.Kind() != reflect.Struct
		omitzero := strings.Contains(","+opts+",", ",omitzero,")
		out = append(out, field{name: name, sf: sf, owner: t, optional: omitempty || omitzero})
	}
	return out
}

func (g *generator) object(t reflect.Type) (obj, error) {
	dir := g.dirs[t]
	var props obj
	var required []string
	for _, f := range fields(t) {
		s, err := g.ref(f.sf.Type)
		if err != nil {
			return nil, fmt.Errorf("%s.%s: %w", t, f.sf.Name, err)
		}
		k := f.sf.Type.Kind()
		if !f.optional && (k == reflect.Slice || k == reflect.Map || k == reflect.Pointer) && !isRaw(f.sf.Type) {
			s = nullable(s)
		}
		if d := g.doc(f.owner.PkgPath(), f.owner.Name()+"."+f.sf.Name); d != "" {
			s = described(s, d)
		}
		props = append(props, kv{f.name, s})
		if !f.optional && dir == output {
			required = append(required, f.name)
		}
	}
	out := obj{{"type", "object"}}
	if len(required) > 0 {
		out = append(out, kv{"required", required})
	}
	if len(props) > 0 {
		out = append(out, kv{"properties", props})
	}
	if dir == strictInput {
		out = append(out, kv{"additionalProperties", false})
	}
	return out, nil
}

// described is s with description d.
func described(s obj, d string) obj {
	switch {
	case len(s) > 0 && s[0].k == "description":
		return append(obj{{"description", d}}, s[1:]...)
	case len(s) > 0 && s[0].k == "$ref":
		return obj{{"description", d}, {"allOf", []any{s}}}
	}
	return append(obj{{"description", d}}, s...)
}

// nullable is s, or null.
func nullable(s obj) obj {
	if len(s) > 0 && s[0].k == "type" {
		c := slices.Clone(s)
		c[0] = kv{"type", []string{s[0].v.(string), "null"}}
		return c
	}
	return obj{{"anyOf", []any{s, obj{{"type", "null"}}}}}
}

// storeSchema is the store's JSON Schema of index, its $defs put in place
// of their references (a component is one schema, without a root of its
// own to resolve them against).
func storeSchema(index string) (obj, error) {
	raw, err := store.SchemaJSON(index)
	if err != nil {
		return nil, err
	}
	var s map[string]any
	if err := json.Unmarshal(raw, &s); err != nil {
		return nil, err
	}
	defs, _ := s["$defs"].(map[string]any)
	inlined, err := inlineDefs(s, defs)
	if err != nil {
		return nil, fmt.Errorf("store schema %s: %w", index, err)
	}
	m := inlined.(map[string]any)
	for _, k := range []string{"$schema", "$id", "$defs", "title"} {
		delete(m, k)
	}
	o := ordered(m).(obj)
	return append(obj{{"description", "The stored document of the " + index + " index, as its JSON Schema in store/schemas checks it."}},
		append(o, kv{"x-store-index", index})...), nil
}

func inlineDefs(v any, defs map[string]any) (any, error) {
	switch v := v.(type) {
	case map[string]any:
		if ref, ok := v["$ref"].(string); ok {
			name, found := strings.CutPrefix(ref, "#/$defs/")
			def, ok := defs[name]
			if !found || !ok || len(v) != 1 {
				return nil, errors.New("a reference other than #/$defs/: " + ref)
			}
			return inlineDefs(def, defs)
		}
		out := make(map[string]any, len(v))
		for k, e := range v {
			x, err := inlineDefs(e, defs)
			if err != nil {
				return nil, err
			}
			out[k] = x
		}
		return out, nil
	case []any:
		out := make([]any, len(v))
		for i, e := range v {
			x, err := inlineDefs(e, defs)
			if err != nil {
				return nil, err
			}
			out[i] = x
		}
		return out, nil
	}
	return v, nil
}

// ordered turns JSON maps into objs with sorted keys, "type" first.
func ordered(v any) any {
	switch v := v.(type) {
	case map[string]any:
		keys := make([]string, 0, len(v))
		for k := range v {
			keys = append(keys, k)
		}
		slices.SortFunc(keys, func(a, b string) int {
			switch {
			case a == b:
				return 0
			case a == "type":
				return -1
			case b == "type":
				return 1
			}
			return strings.Compare(a, b)
		})
		o := make(obj, 0, len(keys))
		for _, k := range keys {
			o = append(o, kv{k, ordered(v[k])})
		}
		return o
	case []any:
		out := make([]any, len(v))
		for i, e := range v {
			out[i] = ordered(e)
		}
		return out
	}
	return v
}

// doc is the doc comment of key ("Type" or "Type.Field") in pkgPath,
// whitespace collapsed.
func (g *generator) doc(pkgPath, key string) string {
	if !g.parsed[pkgPath] {
		g.parsed[pkgPath] = true
		g.parse(pkgPath)
	}
	return g.docs[pkgPath+"."+key]
}

func (g *generator) parse(pkgPath string) {
	dir := filepath.Join("..", strings.TrimPrefix(strings.TrimPrefix(pkgPath, modulePath), "/"))
	fset := token.NewFileSet()
	files, _ := filepath.Glob(filepath.Join(dir, "*.go"))
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, parser.ParseComments)
		if err != nil {
			continue
		}
		for _, d := range f.Decls {
			gd, ok := d.(*ast.GenDecl)
			if !ok || gd.Tok != token.TYPE {
				continue
			}
			for _, spec := range gd.Specs {
				ts := spec.(*ast.TypeSpec)
				cg := ts.Doc
				if cg == nil && len(gd.Specs) == 1 {
					cg = gd.Doc
				}
				g.docs[pkgPath+"."+ts.Name.Name] = clean(cg)
				st, ok := ts.Type.(*ast.StructType)
				if !ok {
					continue
				}
				for _, fl := range st.Fields.List {
					cg := fl.Doc
					if cg == nil {
						cg = fl.Comment
					}
					for _, n := range fl.Names {
						g.docs[pkgPath+"."+ts.Name.Name+"."+n.Name] = clean(cg)
					}
				}
			}
		}
	}
}

func clean(cg *ast.CommentGroup) string {
	if cg == nil {
		return ""
	}
	return strings.Join(strings.Fields(cg.Text()), " ")
}

// generatedMarker opens the generated part of api/openapi.yaml: the last
// entries of components.schemas, down to the end of the file.
const generatedMarker = "    # Generated from the Go wire types by TestWireSchemas (go test ./api -run TestWireSchemas -update): do not edit below.\n"

// spliceGenerated is doc with its generated part replaced by comps.
func spliceGenerated(doc []byte, comps []kv) ([]byte, error) {
	i := bytes.Index(doc, []byte(generatedMarker))
	if i < 0 {
		return nil, errors.New("api/openapi.yaml has no line " + strings.TrimSpace(generatedMarker))
	}
	var buf bytes.Buffer
	enc := yaml.NewEncoder(&buf)
	enc.SetIndent(2)
	if err := enc.Encode(obj(comps)); err != nil {
		return nil, err
	}
	if err := enc.Close(); err != nil {
		return nil, err
	}
	out := append([]byte(nil), doc[:i+len(generatedMarker)]...)
	for line := range strings.SplitSeq(strings.TrimRight(buf.String(), "\n"), "\n") {
		if line == "" {
			out = append(out, '\n')
			continue
		}
		out = append(out, "    "+line+"\n"...)
	}
	return out, nil
}
