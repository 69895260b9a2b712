package app

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	json "github.com/go-json-experiment/json/v1"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/agentbus/agentbus/auth"
	"github.com/agentbus/agentbus/events"
	"github.com/agentbus/agentbus/handlers"
	"github.com/agentbus/agentbus/handlers/ledger"
	"github.com/agentbus/agentbus/handlers/runctl"
	"github.com/agentbus/agentbus/store/embedded"
)

// NATS users of a server run with per-role permissions: one per role, the
// ingress, and the administrator that sets up the topology and runs the
// operator commands (agentbus tenants).
const (
	UserIngress = "ingress"
	UserAdmin   = "admin"
)

// IngressBuckets are the KV buckets the ingress reads and writes besides
// the store's: forwarded keys, cancels, sessions and tenants' API keys.
var IngressBuckets = []string{handlers.BucketCredentials, handlers.BucketCancels, handlers.BucketSessions, auth.KeyBucket,
	runctl.BucketGates, handlers.BucketToolSecrets, ledger.BucketLimits, handlers.BucketConfig}

// NATSUsers are the user names of a server with per-role permissions: one
// per role process (the aggregator process runs the projector too, on one
// connection, so its user holds both roles' permissions), the ingress and
// the administrator.
func NATSUsers() []string {
	users := []string{UserAdmin, UserIngress}
	for _, p := range Processes {
		users = append(users, p.Name)
	}
	return users
}

// grant collects the subjects a user may publish to and subscribe to.
type grant struct{ pub, sub []string }

func (g *grant) publish(s ...string)   { g.pub = append(g.pub, s...) }
func (g *grant) subscribe(s ...string) { g.sub = append(g.sub, s...) }

// readStream lets the user read stream with consumers of its own (the
// ordered consumers and watchers of the client library) and direct gets.
func (g *grant) readStream(stream string) {
	api := "$JS.API."
	g.publish(api+"DIRECT.GET."+stream, api+"DIRECT.GET."+stream+".>", api+"STREAM.MSG.GET."+stream,
		api+"CONSUMER.CREATE."+stream, api+"CONSUMER.CREATE."+stream+".>", api+"CONSUMER.DELETE."+stream+".>",
		api+"CONSUMER.MSG.NEXT."+stream+".>", "$JS.ACK."+stream+".>", "$JS.FC."+stream+".>")
}

// kv lets the user read and write bucket.
func (g *grant) kv(bucket string) {
	g.readStream("KV_" + bucket)
	g.publish("$KV." + bucket + ".>")
}

// objectStore lets the user read and write the objects of bucket; a
// replaced object's chunks are purged.
func (g *grant) objectStore(bucket string) {
	g.readStream("OBJ_" + bucket)
	g.publish("$O."+bucket+".>", "$JS.API.STREAM.PURGE.OBJ_"+bucket)
}

// Permissions are the NATS permissions of user, derived from the role
// declarations (what a role consumes, emits and keeps in KV and object
// stores), so they cannot drift from what the code does. Every user may
// read the topology's metadata (stream and consumer info: a process checks
// the topology at start), publish its events and audit trail, and use its
// buckets and object stores and the store's (storePrefix as in embedded.Config). Nobody but
// the administrator may create or change a stream or a consumer: the
// administrator sets the topology up first (Setup). The administrator's
// permissions are nil: everything.
func Permissions(user, storePrefix string) (*server.Permissions, error) {
	if user == UserAdmin {
		return nil, nil
	}
	var g grant
	g.publish("$JS.API.INFO", "$JS.API.STREAM.INFO.*", "$JS.API.CONSUMER.INFO.*.*")
	g.subscribe("_INBOX.>") // API answers and publish acknowledgements
	storeGrant(&g, storePrefix)
	var buckets []string
	if user == UserIngress {
		g.publish(subjectOf(events.TypeRunRequested), subjectOf(events.TypeApprovalDecided))
		// The audit events no run's hop records (an operator's session
		// changes, the trigger evaluations), as trails of their own.
		g.publish(events.TrailSubject("*"))
		g.readStream(events.StreamAgent) // run.finished, for the callers it holds; the inbound events it consumes
		// Malformed inbound events (agent.inbound.<tenant>), dead-lettered.
		g.publish(subjectOf(events.TypeDeadLettered))
		// Streamed runs' chunks, served (and resumed) from the stream.
		g.readStream(events.StreamReply)
		// Attachments' data, served to the tenant that holds them.
		g.readStream("OBJ_" + handlers.BucketArtifacts)
		buckets = IngressBuckets
	} else {
		i := slices.IndexFunc(Processes, func(p Process) bool { return p.Name == user })
		if i < 0 {
			return nil, fmt.Errorf("no NATS user %q (users: %s)", user, strings.Join(NATSUsers(), ", "))
		}
		for _, name := range Processes[i].Roles {
			r, _ := RoleNamed(name)
			roleGrant(&g, r)
			buckets = append(buckets, r.Buckets...)
			for _, o := range r.ObjectStores {
				g.objectStore(o)
			}
		}
	}
	for _, b := range buckets {
		g.kv(b)
	}
	return &server.Permissions{
		Publish:   &server.SubjectPermission{Allow: compact(g.pub)},
		Subscribe: &server.SubjectPermission{Allow: compact(g.sub)},
	}, nil
}

// roleGrant lets the user consume as role r, emit r's events, its audit
// trail and its dead letters.
func roleGrant(g *grant, r Role) {
	c := r.Consumer()
	g.publish("$JS.API.CONSUMER.MSG.NEXT."+c.Stream+"."+c.Name, "$JS.ACK."+c.Stream+"."+c.Name+".>")
	if c.Single {
		// Handed on at shutdown (events.Worker's trail reader).
		g.publish("$JS.API.CONSUMER.UNPIN." + c.Stream + "." + c.Name)
	}
	// Messages that ran out of deliveries, read back to dead-letter them.
	g.subscribe("$JS.EVENT.ADVISORY.CONSUMER.MAX_DELIVERIES." + c.Stream + "." + c.Name)
	g.publish("$JS.API.STREAM.MSG.GET."+c.Stream, "$JS.API.DIRECT.GET."+c.Stream, "$JS.API.DIRECT.GET."+c.Stream+".>")
	for _, typ := range r.Emits {
		g.publish(subjectOf(typ))
		if typ == events.TypeGroupDeadline || typ == events.TypeRunDeadline || typ == events.TypeApprovalDecided ||
			typ == events.TypeAlertEvaluate {
			// Published as a scheduled message: it waits on its schedule
			// subject, and the server delivers it.
			g.publish(events.ScheduleSubject("*", "*"))
		}
	}
	// A hop's trail rides in its output; one with no output publishes it
	// on its own.
	g.publish(events.TrailSubject("*"), subjectOf(events.TypeDeadLettered))
	g.publish(r.Publishes...)
}

// storeGrant lets the user use the embedded store: its buckets and its
// events stream. With OpenSearch the grant goes unused.
func storeGrant(g *grant, prefix string) {
	name := func(base string) string {
		if prefix == "" {
			return base
		}
		return prefix + "_" + base
	}
	for _, b := range []string{embedded.BucketMemory, embedded.BucketPlans, embedded.BucketSouls, embedded.BucketSessions,
		embedded.BucketDefinitions, embedded.BucketExecutions} {
		g.kv(name(b))
	}
	g.readStream(name(embedded.StreamEvents))
	root := embedded.EventsSubject
	if prefix != "" {
		root = prefix + "." + root
	}
	g.publish(root + ".>")
}

// subjectOf is the subject of typ for every tenant.
func subjectOf(typ string) string {
	if typ == events.TypeReplyChunk {
		return events.ReplySubject("*", "*")
	}
	const probe = "tenant"
	s, err := events.Subject(typ, probe)
	if err != nil || !strings.HasSuffix(s, "."+probe) {
		panic(fmt.Sprintf("app: event type %s has no per-tenant subject: %q %v", typ, s, err)) // a declaration mistake
	}
	return strings.TrimSuffix(s, probe) + "*"
}

func compact(s []string) []string {
	slices.Sort(s)
	return slices.Compact(s)
}

// ServerUsers are the users of a server with per-role permissions, with
// the passwords of passwords (one per NATSUsers name).
func ServerUsers(passwords map[string]string, storePrefix string) ([]*server.User, error) {
	var users []*server.User
	for _, name := range NATSUsers() {
		pw := passwords[name]
		if pw == "" {
			return nil, fmt.Errorf("no password for NATS user %s", name)
		}
		perms, err := Permissions(name, storePrefix)
		if err != nil {
			return nil, err
		}
		users = append(users, &server.User{Username: name, Password: pw, Permissions: perms})
	}
	return users, nil
}

// LoadPasswords reads the NATS users' passwords from path, creating the
// file (mode 0600) with a random password per user when it is missing.
func LoadPasswords(path string) (map[string]string, error) {
	b, err := os.ReadFile(path)
	if err == nil {
		var pw map[string]string
		if err := json.Unmarshal(b, &pw); err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		return pw, nil
	}
	if !errors.Is(err, os.ErrNotExist) {
		return nil, err
	}
	pw := map[string]string{}
	for _, name := range NATSUsers() {
		pw[name] = rand.Text()
	}
	data, err := json.MarshalIndent(pw, "", "  ")
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, err
	}
	if err := os.WriteFile(path, append(data, '\n'), 0o600); err != nil {
		return nil, err
	}
	return pw, nil
}

// Setup creates or updates everything the processes expect to find: the
// streams, consumers and buckets of the roles, the embedded store's
// buckets and stream, and the tenants' key store. With per-role
// permissions only the administrator may; the processes then only check.
// A replica count left to the server (0) is set in c.
func Setup(ctx context.Context, js jetstream.JetStream, c *Config) error {
	if err := c.resolveReplicas(js.Conn()); err != nil {
		return err
	}
	if err := events.Bootstrap(ctx, js, Topology(events.Topology{AckWait: c.AckWait, MaxDeliver: c.MaxDeliver, Replicas: c.Replicas})); err != nil {
		return err
	}
	if c.Store != "opensearch" {
		if _, err := embedded.New(ctx, js, c.embeddedConfig()); err != nil {
			return err
		}
	}
	if _, err := events.EnsureKeyValue(ctx, js, auth.KeyBucketConfig(c.Replicas)); err != nil {
		return err
	}
	_, err := auth.NewKeys(ctx, js)
	return err
}
