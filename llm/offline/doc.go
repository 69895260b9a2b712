// Package offline is agentbus's deterministic model: it needs no network
// and no key, so `make run` works anywhere, and it is the degraded mode
// when a provider is down and MODEL_FALLBACK=offline is set. It routes by
// word overlap with task-type descriptions, plans by chaining skill output
// schemas to input schemas, acts by calling the allowed skill and
// projecting its output onto the return_spec, writes extraction scripts for
// large responses, and synthesises from the step outputs, streaming the
// answer a line at a time.
package offline
