// Package containers starts agentbus's Compose file (deploy/compose) with
// podman, without Docker or a Compose tool: Load reads the file (its
// variables interpolated, its env_files read, decoded strictly so that a
// key it does not translate fails), and RunArgs gives each service's
// `podman run` arguments on the project's network.
//
// Its tests behind the build tag "containers" (`make test-containers`, which
// builds the images first with `make images`) start the whole deployment as
// containers: a 3-node NATS cluster, the topology set-up, every role, the
// ingress and the demo Skill Service, and drive it through the ingress: the
// demo task and the large-response menu task (through the sandbox in the
// executor's container), an executor killed mid-run, a NATS node stopped
// and started, and every role container stopped with SIGTERM. They fail,
// never skip, when podman or an image is missing. Without the tag only the
// translation's tests run.
package containers
