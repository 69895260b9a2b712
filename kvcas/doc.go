// Package kvcas is agentbus's one read-modify-write on a NATS KV entry:
// read the entry's JSON value and revision, change it, write it back only
// if nobody wrote the entry since (create if it was absent, update at the
// revision read otherwise), and on a lost race read again and retry, a
// bounded number of times.
//
// Every record several processes change (fan-in counts, budget pools,
// sessions, gates, rate windows, alert state) goes through Update, so
// there is one definition of a conflict (IsConflict) and one bound on
// the retries (MaxAttempts).
package kvcas
