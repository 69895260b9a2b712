// Package runclient submits agentbus runs and awaits their results: the
// one "submit a run, wait for its answer" client of the ingress, the CLI,
// the benchmark and the chaos harness.
//
// Client is the NATS transport: it publishes a run.requested for an
// orch.RunRequest and waits for the run's run.finished. One consumer of
// the AGENT stream, recreated from the last result it handed over when it
// fails, serves every run the process has in flight; each run waits on
// its own channel, bounded by its context.
//
// HTTP is the same submit-and-await over the ingress's POST /agent/run,
// synchronous (Run) or as a server-sent event stream (Stream), and cancels
// runs (Cancel). The wire types of that API (Request, Response,
// CancelResponse, Chunk, APIError) live here, shared by the ingress that
// serves them and the clients that read them.
package runclient
