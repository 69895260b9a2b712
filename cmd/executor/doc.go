// Command executor runs agentbus's executor (SubAgent-B): it runs plan
// steps with only their allowed skills, reduces large responses in the
// sandbox and writes outputs to memory. Run any number of copies against
// one NATS; they share the work.
package main
