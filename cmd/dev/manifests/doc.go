// Package manifests tests the deployment manifests: the Kubernetes base in
// deploy/kubernetes (kubectl apply -k deploy/kubernetes) and the Docker
// Compose file in deploy/compose. Every object is decoded strictly into
// the Kubernetes API types, and the manifests are checked against the role
// declarations of cmd/internal/app, so that a role, consumer or NATS user
// added to agentbus fails the tests until the manifests have it too. The
// package has no non-test code.
package manifests
