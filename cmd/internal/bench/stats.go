package bench

import (
	"slices"
	"time"
)

// Dist summarises a latency sample.
type Dist struct {
	N    int     `json:"n"`
	P50  float64 `json:"p50_ms"`
	P99  float64 `json:"p99_ms"`
	Mean float64 `json:"mean_ms"`
}

// distOf computes the median, p99 and mean of d in milliseconds.
func distOf(d []time.Duration) Dist {
	if len(d) == 0 {
		return Dist{}
	}
	s := slices.Clone(d)
	slices.Sort(s)
	var sum time.Duration
	for _, v := range s {
		sum += v
	}
	return Dist{N: len(s), P50: ms(pct(s, 0.50)), P99: ms(pct(s, 0.99)), Mean: ms(sum / time.Duration(len(s)))}
}

func pct(sorted []time.Duration, p float64) time.Duration {
	i := int(p*float64(len(sorted)-1) + 0.5)
	return sorted[i]
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// ratio returns a/b, or 0 when b is 0.
func ratio(a, b float64) float64 {
	if b == 0 {
		return 0
	}
	return a / b
}
