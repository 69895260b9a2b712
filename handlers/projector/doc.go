// Package projector is the projector role: it writes the store's
// projections (audit events, plans, sessions, executions and the
// exchanges kept in users' memory) from the audit trails the messages of
// the AGENT stream carry.
package projector
