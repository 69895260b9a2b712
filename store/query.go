package store

// MemoryQuery is a similarity search over agent_memory. TenantID is
// required; Scope and UserID, when non-empty, further filter the
// candidates. Hits are ordered by descending cosine similarity to Vector.
type MemoryQuery struct {
	TenantID string
	Scope    string
	UserID   string
	Vector   []float32
	// TopK bounds the number of hits; values <= 0 mean DefaultTopK.
	TopK int
}

// DefaultTopK is the number of hits returned when MemoryQuery.TopK <= 0.
const DefaultTopK = 10

// MemoryHit is one result of a MemoryQuery.
type MemoryHit struct {
	Memory
	// Score is the cosine similarity between the query vector and the
	// memory's embedding.
	Score float32
}

// TraceQuery selects the events of one session or one plan of a tenant.
// TenantID is required and at least one of SessionID and PlanID must be
// set; when both are set, events must match both.
type TraceQuery struct {
	TenantID  string
	SessionID string
	PlanID    string
}

// PlanHealth aggregates the plans of one tenant.
type PlanHealth struct {
	// Plans is the total number of plans.
	Plans int
	// Complete is the number of plans with status "complete".
	Complete int
	// Failed is the number of plans with status "failed".
	Failed int
	// SuccessRate is Complete / (Complete + Failed), i.e. over finished
	// plans only; 0 when no plan has finished.
	SuccessRate float64
	// AvgReplans is the mean replan_count over all plans; 0 when there are
	// no plans.
	AvgReplans float64
	// ByStatus counts plans per status.
	ByStatus map[string]int
}

// ComputePlanHealth aggregates plans into a PlanHealth. It defines the
// aggregation semantics every backend must reproduce.
func ComputePlanHealth(plans []Plan) PlanHealth {
	byStatus := map[string]int{}
	replans := 0
	for _, p := range plans {
		byStatus[p.Status]++
		replans += p.ReplanCount
	}
	return PlanHealthFromCounts(byStatus, replans)
}

// PlanHealthFromCounts builds the PlanHealth of a set of plans from its
// number of plans per status and its total replan_count, for backends
// that aggregate server-side. It takes ownership of byStatus.
func PlanHealthFromCounts(byStatus map[string]int, totalReplans int) PlanHealth {
	if byStatus == nil {
		byStatus = map[string]int{}
	}
	h := PlanHealth{ByStatus: byStatus}
	for _, n := range byStatus {
		h.Plans += n
	}
	h.Complete = byStatus[PlanStatusComplete]
	h.Failed = byStatus[PlanStatusFailed] + byStatus[PlanStatusRejected] + byStatus[PlanStatusExpired]
	if done := h.Complete + h.Failed; done > 0 {
		h.SuccessRate = float64(h.Complete) / float64(done)
	}
	if h.Plans > 0 {
		h.AvgReplans = float64(totalReplans) / float64(h.Plans)
	}
	return h
}
