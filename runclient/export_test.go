package runclient

// Arrived reports whether the run's result has been handed to p and
// waits for its Wait.
func (p *Pending) Arrived() bool { return len(p.ch) > 0 }
