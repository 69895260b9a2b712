package api

import (
	"bytes"
	_ "embed"
	"errors"
	"fmt"
	"strconv"
	"sync"

	json "github.com/go-json-experiment/json/v1"
	"go.yaml.in/yaml/v4"
)

// YAML is the document as written, api/openapi.yaml.
//
//go:embed openapi.yaml
var YAML []byte

// JSON returns the document as JSON, its keys in the order written,
// converted once.
var JSON = sync.OnceValues(func() ([]byte, error) { return toJSON(YAML) })

// toJSON converts a YAML document (mappings with string keys, sequences
// and scalars, no aliases) to JSON, keeping its keys' order.
func toJSON(src []byte) ([]byte, error) {
	var root yaml.Node
	if err := yaml.Unmarshal(src, &root); err != nil {
		return nil, fmt.Errorf("api: openapi.yaml: %w", err)
	}
	if root.Kind != yaml.DocumentNode || len(root.Content) != 1 {
		return nil, errors.New("api: openapi.yaml is not one YAML document")
	}
	var buf bytes.Buffer
	if err := writeJSON(&buf, root.Content[0]); err != nil {
		return nil, fmt.Errorf("api: openapi.yaml: %w", err)
	}
	return buf.Bytes(), nil
}

func writeJSON(buf *bytes.Buffer, n *yaml.Node) error {
	switch n.Kind {
	case yaml.MappingNode:
		buf.WriteByte('{')
		for i := 0; i+1 < len(n.Content); i += 2 {
			if i > 0 {
				buf.WriteByte(',')
			}
			k, _ := json.Marshal(n.Content[i].Value)
			buf.Write(k)
			buf.WriteByte(':')
			if err := writeJSON(buf, n.Content[i+1]); err != nil {
				return err
			}
		}
		buf.WriteByte('}')
	case yaml.SequenceNode:
		buf.WriteByte('[')
		for i, c := range n.Content {
			if i > 0 {
				buf.WriteByte(',')
			}
			if err := writeJSON(buf, c); err != nil {
				return err
			}
		}
		buf.WriteByte(']')
	case yaml.ScalarNode:
		return writeScalar(buf, n)
	default:
		return fmt.Errorf("line %d: an alias or other node JSON cannot hold", n.Line)
	}
	return nil
}

func writeScalar(buf *bytes.Buffer, n *yaml.Node) error {
	switch n.ShortTag() {
	case "!!null":
		buf.WriteString("null")
	case "!!bool":
		b, err := strconv.ParseBool(n.Value)
		if err != nil {
			return fmt.Errorf("line %d: %q is not a boolean", n.Line, n.Value)
		}
		buf.WriteString(strconv.FormatBool(b))
	case "!!int", "!!float":
		f, err := strconv.ParseFloat(n.Value, 64)
		if err != nil {
			return fmt.Errorf("line %d: %q is not a JSON number", n.Line, n.Value)
		}
		b, _ := json.Marshal(f)
		buf.Write(b)
	default:
		b, _ := json.Marshal(n.Value)
		buf.Write(b)
	}
	return nil
}
