package eventstest

import (
	"context"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/agentbus/agentbus/events"
)

// Server starts an in-process nats-server with JetStream on a free port
// and a temporary store, and shuts it down when the test ends.
func Server(t testing.TB) *server.Server {
	t.Helper()
	return ServerAt(t, t.TempDir())
}

// ServerAt starts a server on storeDir, so a test can restart one on the
// same data.
func ServerAt(t testing.TB, storeDir string) *server.Server {
	t.Helper()
	s, err := events.RunServer(events.ServerConfig{Port: -1, StoreDir: storeDir})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Shutdown(); s.WaitForShutdown() })
	return s
}

// Connect connects to s and returns the connection and its JetStream
// handle, closed when the test ends.
func Connect(t testing.TB, s *server.Server) (*nats.Conn, jetstream.JetStream) {
	t.Helper()
	nc, err := nats.Connect(s.ClientURL(), nats.MaxReconnects(-1), nats.ReconnectWait(100*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	return nc, js
}

// Bootstrap starts a server, connects and creates topo: the streams and
// the consumers and buckets topo declares. Start from TestTopology, whose
// short ack wait makes redelivery tests run in seconds.
func Bootstrap(t testing.TB, topo events.Topology) (*server.Server, *nats.Conn, jetstream.JetStream) {
	t.Helper()
	s := Server(t)
	nc, js := Connect(t, s)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := events.Bootstrap(ctx, js, topo); err != nil {
		t.Fatal(err)
	}
	return s, nc, js
}

// TestTopology is the topology tests start from: short ack wait, few
// deliveries, no consumers or buckets.
func TestTopology() events.Topology {
	return events.Topology{AckWait: 2 * time.Second, MaxDeliver: 4}
}
