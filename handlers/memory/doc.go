// Package memory is step memory: the single choke point that writes a
// step's output (MemoryWriter: labels, contracts, locks) and the reads of
// a step's inputs; and recall (Recall), the long-term memories a run
// starts with.
package memory
