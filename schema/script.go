package schema

import (
	"fmt"
	"strings"

	json "github.com/go-json-experiment/json/v1"
)

// JQ renders derivations as one jq program, the cheap extraction script
// the executor can run in-process.
func JQ(ds []Derivation) string {
	parts := make([]string, 0, len(ds))
	for _, d := range ds {
		src := fmt.Sprintf(".%s", jqKey(d.Source))
		switch {
		case d.Item != "":
			parts = append(parts, fmt.Sprintf("%s: [%s[]?.%s]", jqKey(d.Field), src, jqKey(d.Item)))
		case len(d.Keep) > 0:
			keys := make([]string, len(d.Keep))
			for i, k := range d.Keep {
				keys[i] = jqKey(k)
			}
			parts = append(parts, fmt.Sprintf("%s: [%s[]? | {%s}]", jqKey(d.Field), src, strings.Join(keys, ", ")))
		default:
			parts = append(parts, fmt.Sprintf("%s: %s", jqKey(d.Field), src))
		}
	}
	return "{" + strings.Join(parts, ", ") + "}"
}

func jqKey(k string) string {
	b, _ := json.Marshal(k)
	return string(b)
}

// Python renders derivations as a Python extraction script: it reads the
// JSON file named by argv[1] and prints only the derived fields as JSON.
func Python(ds []Derivation) string {
	var b strings.Builder
	b.WriteString("import json, sys\n\nwith open(sys.argv[1]) as f:\n    data = json.load(f)\nout = {}\n")
	for _, d := range ds {
		src, field := pyStr(d.Source), pyStr(d.Field)
		switch {
		case d.Item != "":
			fmt.Fprintf(&b, "out[%s] = [el.get(%s) for el in data.get(%s) or [] if isinstance(el, dict)]\n", field, pyStr(d.Item), src)
		case len(d.Keep) > 0:
			keys := make([]string, len(d.Keep))
			for i, k := range d.Keep {
				keys[i] = pyStr(k)
			}
			fmt.Fprintf(&b, "out[%s] = [{k: el.get(k) for k in (%s,)} for el in data.get(%s) or [] if isinstance(el, dict)]\n",
				field, strings.Join(keys, ", "), src)
		default:
			fmt.Fprintf(&b, "out[%s] = data.get(%s)\n", field, src)
		}
	}
	b.WriteString("print(json.dumps(out))\n")
	return b.String()
}

// pyStr quotes s as a Python string literal (JSON strings are valid ones).
func pyStr(s string) string { return jqKey(s) }
