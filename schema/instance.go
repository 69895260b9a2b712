package schema

import (
	"bytes"
	stdjson "encoding/json"
	"errors"
	"io"

	"github.com/go-json-experiment/json/jsontext"
)

// instance decodes data into the values jsonschema validates (maps,
// slices, encoding/json's Number, strings, booleans and nil), as
// jsonschema.UnmarshalJSON does, in one pass of a token decoder rather
// than through a reflective decode into an interface. Like it, it keeps
// the last of duplicate names and replaces invalid UTF-8.
func instance(data []byte) (any, error) {
	dec := jsontext.NewDecoder(bytes.NewReader(data), jsontext.AllowDuplicateNames(true), jsontext.AllowInvalidUTF8(true))
	v, err := readInstance(dec)
	if err != nil {
		return nil, err
	}
	if _, err := dec.ReadToken(); err != io.EOF {
		return nil, errors.New("invalid character after top-level value")
	}
	return v, nil
}

// readInstance reads the next value of dec.
func readInstance(dec *jsontext.Decoder) (any, error) {
	tok, err := dec.ReadToken()
	if err != nil {
		return nil, err
	}
	switch tok.Kind() {
	case '{':
		m := map[string]any{}
		for dec.PeekKind() != '}' {
			tok, err := dec.ReadToken()
			if err != nil {
				return nil, err
			}
			name := tok.String() // before the next read voids tok
			v, err := readInstance(dec)
			if err != nil {
				return nil, err
			}
			m[name] = v
		}
		_, err := dec.ReadToken()
		return m, err
	case '[':
		a := []any{}
		for dec.PeekKind() != ']' {
			v, err := readInstance(dec)
			if err != nil {
				return nil, err
			}
			a = append(a, v)
		}
		_, err := dec.ReadToken()
		return a, err
	case '"':
		return tok.String(), nil
	case '0':
		return stdjson.Number(tok.String()), nil
	case 't', 'f':
		return tok.Bool(), nil
	}
	return nil, nil // null
}
