package app

import (
	"errors"

	"github.com/nats-io/nats.go"
)

// ClusterReplicas is the replica count of every stream and bucket on a
// NATS cluster when REPLICAS is not set.
const ClusterReplicas = 3

// errReplicasUnknown reports a connection that has not reached a server
// yet, so the replica count cannot be derived from it.
var errReplicasUnknown = errors.New("app: not connected to NATS yet: replica count unknown")

// resolveReplicas sets c.Replicas when the configuration leaves it to the
// server (0): 1 on a single server, ClusterReplicas when the server is a
// node of a cluster. Every process of a deployment connects to the same
// servers, so they all come to the same count.
func (c *Config) resolveReplicas(nc *nats.Conn) error {
	if c.Replicas > 0 {
		return nil
	}
	if !nc.IsConnected() {
		return errReplicasUnknown
	}
	c.Replicas = 1
	if nc.ConnectedClusterName() != "" {
		c.Replicas = ClusterReplicas
	}
	return nil
}
