package events

import (
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats-server/v2/server"
)

// ServerConfig configures an embedded nats-server.
type ServerConfig struct {
	Host       string // default 127.0.0.1
	Port       int    // -1 picks a free port; 0 means the NATS default 4222
	StoreDir   string // JetStream file store; required
	SyncAlways bool   // fsync every write (sync_interval: always)
	ServerName string // default "agentbus"
	// Users, when set, are the only accounts that may connect, each with
	// its own permissions; none means an open server (loopback only).
	Users []*server.User
}

// RunServer starts an embedded nats-server with JetStream and waits until
// it accepts connections. Shut it down with Shutdown and WaitForShutdown.
func RunServer(cfg ServerConfig) (*server.Server, error) {
	if cfg.StoreDir == "" {
		return nil, errors.New("events: embedded server needs a store dir")
	}
	if cfg.Host == "" {
		cfg.Host = "127.0.0.1"
	}
	if cfg.ServerName == "" {
		cfg.ServerName = "agentbus"
	}
	opts := &server.Options{
		ServerName: cfg.ServerName,
		Host:       cfg.Host,
		Port:       cfg.Port,
		JetStream:  true,
		StoreDir:   cfg.StoreDir,
		SyncAlways: cfg.SyncAlways,
		NoSigs:     true,
		NoLog:      true,
		Users:      cfg.Users,
	}
	if cfg.Port == 0 {
		opts.Port = server.DEFAULT_PORT
	}
	s, err := server.NewServer(opts)
	if err != nil {
		return nil, fmt.Errorf("events: embedded server: %w", err)
	}
	go s.Start()
	if !s.ReadyForConnections(15 * time.Second) {
		s.Shutdown()
		return nil, errors.New("events: embedded server did not become ready")
	}
	return s, nil
}
