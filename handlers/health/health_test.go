package health

import (
	"testing"
)

// TestHealth_Percentile is the nearest-rank percentile.
func TestHealth_Percentile(t *testing.T) {
	for _, tc := range []struct {
		vs   []int64
		want int64
	}{{nil, 0}, {[]int64{7}, 7}, {[]int64{5, 1, 3}, 5}, {[]int64{10, 20, 30, 40, 50, 60, 70, 80, 90, 100, 110, 120, 130, 140, 150, 160, 170, 180, 190, 200}, 190}} {
		if got := percentile(tc.vs, 0.95); got != tc.want {
			t.Errorf("p95 of %v = %d, want %d", tc.vs, got, tc.want)
		}
	}
}
