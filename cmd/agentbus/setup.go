package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/agentbus/agentbus/cmd/internal/app"
)

// setupAttempt bounds one attempt of the set-up: a JetStream request sent
// while the cluster has no meta leader may get no answer at all, and would
// otherwise wait for the whole --timeout.
const setupAttempt = time.Minute

// setup sets the topology up on a NATS server (or cluster) that agentbus
// does not run: the streams, consumers and buckets of every role, the
// store's and the tenants' key store, with the deployment's replica count,
// ack wait and delivery limit. With per-role NATS users only admin may
// create them; the role processes wait, not ready, until they exist. It is
// idempotent: run again, it changes only what differs (a new replica
// count, for one).
func setup(args []string) int {
	timeout := 2 * time.Minute
	if !app.EnvNATSUser.IsSet() {
		args = append([]string{"--nats-user", app.UserAdmin}, args...) // admin unless told otherwise
	}
	c := app.Parse("agentbus setup", "set the streams, consumers and buckets up on a NATS server or cluster, as admin", args,
		func(fs *flag.FlagSet) {
			fs.DurationVar(&timeout, "timeout", timeout, "give up when the server is not reachable, or the setup not done, after this long")
		})
	log := app.Logger("setup", c.LogLevel)
	user := c.NATSUser
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	var nc *nats.Conn
	var err error
	for {
		// A server still starting is waited for; refused credentials are
		// an answer.
		nc, err = nats.Connect(c.NATSURL, nats.Name("agentbus-setup"), nats.UserInfo(user, c.NATSPassword), nats.MaxReconnects(-1))
		if err == nil || errors.Is(err, nats.ErrAuthorization) || ctx.Err() != nil {
			break
		}
		log.Warn().Err(err).Msg("connect: retrying")
		select {
		case <-ctx.Done():
		case <-time.After(time.Second):
		}
	}
	if err != nil {
		return app.LogFatal(log, "connect to "+c.NATSURL+" as "+user, err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return app.LogFatal(log, "jetstream", err)
	}
	for {
		// A cluster still electing its leaders answers errors for a while,
		// or drops the requests: each attempt has its own deadline, so that
		// a dropped request is retried rather than awaited until --timeout.
		attempt, cancelAttempt := context.WithTimeout(ctx, setupAttempt)
		err = app.Setup(attempt, js, c)
		cancelAttempt()
		if err == nil || ctx.Err() != nil {
			break
		}
		log.Warn().Err(err).Msg("setup: retrying")
		select {
		case <-ctx.Done():
		case <-time.After(time.Second):
		}
	}
	if err != nil {
		return app.LogFatal(log, "set up the topology", err)
	}
	fmt.Fprintf(os.Stdout, "topology set up on %s as %s: %d replicas, store %s\n", c.NATSURL, user, c.Replicas, c.Store)
	return 0
}
