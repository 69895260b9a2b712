package sandbox

import (
	"bytes"
	"errors"
	"io"

	json "github.com/go-json-experiment/json/v1"
)

// countRows counts the rows of data: the number of elements when data is one
// JSON array (and nothing else), otherwise the number of lines, a last line
// without a newline included.
func countRows(data []byte) int {
	if n, ok := jsonArrayLen(data); ok {
		return n
	}
	n := bytes.Count(data, []byte{'\n'})
	if len(data) > 0 && data[len(data)-1] != '\n' {
		n++
	}
	return n
}

// jsonArrayLen returns the length of data if it is exactly one JSON array.
func jsonArrayLen(data []byte) (int, bool) {
	trimmed := bytes.TrimSpace(data)
	if len(trimmed) < 2 || trimmed[0] != '[' {
		return 0, false
	}
	dec := json.NewDecoder(bytes.NewReader(trimmed))
	if _, err := dec.Token(); err != nil {
		return 0, false
	}
	n := 0
	for dec.More() {
		var skip json.RawMessage
		if err := dec.Decode(&skip); err != nil {
			return 0, false
		}
		n++
	}
	if _, err := dec.Token(); err != nil { // the closing ]
		return 0, false
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return 0, false
	}
	return n, true
}
