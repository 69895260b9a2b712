package projector

// Queued returns the number of events queued behind the write under way.
func Queued(p *Projector) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.pending)
}
