// Command healthcheck is the probe of agentbus's images, which have no shell
// and no HTTP client: it GETs the URL it is given and exits 0 when the answer
// is 2xx, 1 otherwise (saying why on stderr), within a timeout. The Compose
// file runs it as each container's healthcheck, on the endpoint the process
// serves: /metrics of a role process, /healthz of the ingress, /healthz of a
// NATS node.
//
//	/healthcheck [-timeout 3s] http://127.0.0.1:9464/metrics
package main
