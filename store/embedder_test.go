package store

import (
	"context"
	"math"
	"testing"
)

func TestHashEmbedder(t *testing.T) {
	ctx := context.Background()
	e := NewHashEmbedder(128)
	if e.Dimension() != 128 || NewHashEmbedder(0).Dimension() != DefaultDimension {
		t.Fatalf("dimensions %d %d", e.Dimension(), NewHashEmbedder(0).Dimension())
	}
	texts := []string{"Quarterly revenue report", "quarterly REVENUE report!", "revenue for the quarter", "kitten photos", ""}
	vs, err := e.Embed(ctx, texts)
	if err != nil || len(vs) != len(texts) {
		t.Fatalf("Embed: %v, %d vectors", err, len(vs))
	}
	for i, v := range vs[:4] {
		if len(v) != 128 {
			t.Fatalf("vector %d has length %d", i, len(v))
		}
		var sq float64
		for _, x := range v {
			sq += float64(x) * float64(x)
		}
		if math.Abs(sq-1) > 1e-5 {
			t.Fatalf("vector %d not normalised: |v|^2 = %v", i, sq)
		}
	}
	if c := Cosine(vs[0], vs[1]); c < 0.9999 {
		t.Fatalf("case/punctuation changed the vector: cosine %v", c)
	}
	if related, unrelated := Cosine(vs[0], vs[2]), Cosine(vs[0], vs[3]); related <= unrelated {
		t.Fatalf("related %v <= unrelated %v", related, unrelated)
	}
	for _, x := range vs[4] {
		if x != 0 {
			t.Fatal("empty text should embed to the zero vector")
		}
	}
	again, _ := NewHashEmbedder(128).Embed(ctx, texts[:1])
	for i := range again[0] {
		if again[0][i] != vs[0][i] {
			t.Fatal("embedding is not deterministic")
		}
	}
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := e.Embed(cancelled, texts); err == nil {
		t.Fatal("Embed ignored a cancelled context")
	}
}

func TestCosine(t *testing.T) {
	cases := []struct {
		a, b []float32
		want float32
	}{
		{[]float32{1, 0}, []float32{1, 0}, 1},
		{[]float32{1, 0}, []float32{0, 2}, 0},
		{[]float32{1, 1}, []float32{-2, -2}, -1},
		{[]float32{1}, []float32{1, 0}, 0},
		{nil, nil, 0},
		{[]float32{0, 0}, []float32{1, 0}, 0},
	}
	for _, c := range cases {
		if got := Cosine(c.a, c.b); math.Abs(float64(got-c.want)) > 1e-6 {
			t.Errorf("Cosine(%v, %v) = %v, want %v", c.a, c.b, got, c.want)
		}
	}
}

func TestComputePlanHealth(t *testing.T) {
	h := ComputePlanHealth(nil)
	if h.Plans != 0 || h.SuccessRate != 0 || h.AvgReplans != 0 || h.ByStatus == nil {
		t.Fatalf("empty: %+v", h)
	}
	h = ComputePlanHealth([]Plan{
		{Status: PlanStatusComplete, ReplanCount: 2},
		{Status: PlanStatusFailed},
		{Status: PlanStatusExecuting, ReplanCount: 1},
	})
	if h.Plans != 3 || h.Complete != 1 || h.Failed != 1 || h.SuccessRate != 0.5 || h.AvgReplans != 1 ||
		h.ByStatus[PlanStatusExecuting] != 1 {
		t.Fatalf("got %+v", h)
	}
}

func TestSchemaErrorMessage(t *testing.T) {
	err := &SchemaError{Index: IndexPlans, Field: "/status", Reason: "bad"}
	if got, want := err.Error(), "store: schema violation: agent_plans /status: bad"; got != want {
		t.Fatalf("got %q, want %q", got, want)
	}
}
