// Command ingress serves agentbus's HTTP API: POST /agent/run publishes a
// run and answers with its result (JSON or server-sent events), and the
// plan and trace endpoints read the store.
package main
