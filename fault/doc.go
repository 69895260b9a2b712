// Package fault is agentbus's one classification of errors by what a
// retry can do for them.
//
// An error is permanent when handling the same input again must fail the
// same way: a schema that does not compile, a value that does not
// validate, a return_spec no output can give, an argument that is missing
// or malformed, a skill the catalog does not have, a refused caller, the
// offline model's failures. The package that finds such an error marks it
// with Permanent (most mark a sentinel once, where it is declared), and
// the mark survives every %w that wraps it.
//
// Every other error is transient: a transport error, a timeout, a service
// or broker that is unavailable, and any error nobody classified. That is
// the default on purpose. A transient error costs a redelivery, which the
// consumer's MaxDeliver bounds; a transient error taken for a permanent
// one would end work a retry could have done. So an error is permanent
// only when something marked it, and never when it also says the hop's
// own context ended (context.Canceled, context.DeadlineExceeded): that
// says nothing of the input, only that the hop did not finish.
//
// The roles act on the classification (docs/ARCHITECTURE.md, "Delivery
// guarantees"): a permanent error ends its step, or its run, on the first
// delivery, with its reason; the worker runtime dead-letters a permanent
// error that reaches it at once; a transient one is redelivered with
// backoff.
//
// The package imports nothing of agentbus, so every layer may import it.
package fault
