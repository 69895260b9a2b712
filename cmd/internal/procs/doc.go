// Package procs builds agentbus binaries and runs them as OS processes:
// the multi-process tests and the chaos harness start, signal, stop and
// restart real processes with it.
package procs
