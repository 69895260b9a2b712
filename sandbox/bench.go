package sandbox

import (
	"context"
	"fmt"
	"slices"
	"time"
)

// BenchStartToResult measures the start-to-result latency of n runs of a
// trivial Python script and of n runs of a trivial jq expression against a
// small JSON file, and returns the medians. It is used by make bench.
func BenchStartToResult(ctx context.Context, s *Sandbox, n int) (pythonP50, jqP50 time.Duration, err error) {
	if n < 1 {
		n = 1
	}
	t, err := s.NewTask("bench")
	if err != nil {
		return 0, 0, err
	}
	defer t.Close()
	id, err := t.WriteTemp([]byte(`[{"id":1,"name":"a"},{"id":2,"name":"b"}]`))
	if err != nil {
		return 0, 0, err
	}
	const script = "import json\nprint(json.dumps([x['id'] for x in json.load(open(input_file))]))\n"
	py := make([]time.Duration, 0, n)
	jq := make([]time.Duration, 0, n)
	for range n {
		start := time.Now()
		if _, err := s.ExecPython(ctx, t, script, id); err != nil {
			return 0, 0, fmt.Errorf("bench python: %w", err)
		}
		py = append(py, time.Since(start))
		start = time.Now()
		if _, err := s.ExecJQ(ctx, t, "map(.id)", id); err != nil {
			return 0, 0, fmt.Errorf("bench jq: %w", err)
		}
		jq = append(jq, time.Since(start))
	}
	return median(py), median(jq), nil
}

func median(d []time.Duration) time.Duration {
	slices.Sort(d)
	return d[len(d)/2]
}
