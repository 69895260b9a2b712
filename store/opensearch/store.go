package opensearch

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"sync/atomic"

	json "github.com/go-json-experiment/json/v1"
	osgo "github.com/opensearch-project/opensearch-go/v4"
	"github.com/opensearch-project/opensearch-go/v4/opensearchapi"
	"github.com/opensearch-project/opensearch-go/v4/plugins/ism"

	"github.com/agentbus/agentbus/store"
)

// ErrISMUnavailable is returned by New with Config.ISM = ISMRequired when
// the cluster has no Index State Management plugin.
var ErrISMUnavailable = errors.New("opensearch: index state management plugin not installed")

// Refresh policy of the writes that later searches must see: the request
// returns once the write is searchable. Reads by id (GetMemory, GetPlan,
// GetSoul, GetSession) are real-time and never need it.
const refreshWaitFor = "wait_for"

// maxIDBytes is the largest document _id OpenSearch accepts.
const maxIDBytes = 512

// Store is the OpenSearch backend. Create it with New; it is safe for
// concurrent use.
type Store struct {
	cfg   Config
	api   *opensearchapi.Client
	ism   *ism.Client // nil with ISMDisabled
	names names
	// hasISM is set by EnsureIndices, which may run again concurrently.
	hasISM atomic.Bool
}

// names are the resource names of one Store, all carrying the prefix.
type names struct {
	memory, plans, souls, sessions, definitions string
	// events is the alias every event is written and read through; its
	// backing indices are events-000001, events-000002, ...
	events string
	// eventsTemplate is the index template of the backing indices.
	eventsTemplate string
	// eventsPolicy is the ISM policy id.
	eventsPolicy string
	// executions is the alias of the execution records' day indices,
	// and the name of their index template; executionsPolicy the ISM
	// policy deleting them.
	executions, executionsPolicy string
}

func newNames(prefix string) names {
	return names{
		memory:         prefix + store.IndexMemory,
		plans:          prefix + store.IndexPlans,
		souls:          prefix + store.IndexSouls,
		sessions:       prefix + store.IndexSessions,
		definitions:    prefix + store.IndexDefinitions,
		events:         prefix + store.IndexEvents,
		eventsTemplate: prefix + store.IndexEvents,
		eventsPolicy:   prefix + store.IndexEvents + "-retention",

		executions:       prefix + store.IndexExecutions,
		executionsPolicy: prefix + store.IndexExecutions + "-ttl",
	}
}

// firstEventsIndex is the first backing index of the events alias; ISM
// rollover increments the trailing number.
func (n names) firstEventsIndex() string { return n.events + "-000001" }

// New validates cfg, connects to the cluster and ensures the indices, the
// events alias and template and (per cfg.ISM) the retention policy exist
// with the expected mappings. It is idempotent and safe to call from
// several processes at once.
func New(ctx context.Context, cfg Config) (*Store, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	oc, err := clientConfig(ctx, cfg)
	if err != nil {
		return nil, err
	}
	api, err := opensearchapi.NewClient(opensearchapi.Config{Client: oc})
	if err != nil {
		return nil, fmt.Errorf("opensearch: client: %w", err)
	}
	s := &Store{cfg: cfg, api: api, names: newNames(cfg.IndexPrefix)}
	if cfg.ISM != ISMDisabled {
		s.ism, err = ism.NewClient(ism.Config{Client: oc})
		if err != nil {
			_ = api.Client.Close()
			return nil, fmt.Errorf("opensearch: ISM client: %w", err)
		}
	}
	if err := s.EnsureIndices(ctx); err != nil {
		_ = s.Close()
		return nil, err
	}
	return s, nil
}

// Close releases the clients' background resources and idle connections.
func (s *Store) Close() error {
	err := s.api.Client.Close()
	if s.ism != nil {
		err = errors.Join(err, s.ism.Client.Close())
	}
	if err != nil {
		return fmt.Errorf("opensearch: close: %w", err)
	}
	return nil
}

// ISMEnabled reports whether the agent_events retention policy is
// installed (see Config.ISM).
func (s *Store) ISMEnabled() bool { return s.hasISM.Load() }

// IndexNames returns the names of the seven indices (agent_events is the
// alias of its rolling backing indices, agent_executions of its day
// indices), in store.Indexes() order.
func (s *Store) IndexNames() []string {
	n := s.names
	return []string{n.memory, n.plans, n.events, n.souls, n.sessions, n.definitions, n.executions}
}

// withTimeout bounds one Store call by cfg.Timeout.
func (s *Store) withTimeout(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, s.cfg.Timeout)
}

// status returns the HTTP status of r, or 0 if no response arrived. Typed
// opensearch-go calls expose r as resp.Inspect().Response.
func status(r *osgo.Response) int {
	if r == nil {
		return 0
	}
	return r.StatusCode
}

// check turns the result of a typed opensearch-go call into an error,
// annotated with what was attempted. A 2xx answer is a success even if
// opensearch-go reports partial failures in it (whether it does depends
// on OPENSEARCH_GO_ERROR_MASK): callers check the items or shards they
// care about themselves. A 2xx answer that could not be read or decoded
// is an error.
func check(r *osgo.Response, err error, what string) error {
	st := status(r)
	if st >= 200 && st < 300 {
		var partial opensearchapi.PartialFailureError
		if err == nil || errors.As(err, &partial) && partial.IsPartial() {
			return nil
		}
	}
	if err == nil {
		err = fmt.Errorf("unexpected status %d", st)
	}
	return fmt.Errorf("opensearch: %s: %w", what, err)
}

// jsonBody encodes v for a request body.
func jsonBody(v any) (io.Reader, error) {
	data, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("opensearch: encode request: %w", err)
	}
	return bytes.NewReader(data), nil
}

// docID checks that id can be an OpenSearch document _id.
func docID(what, id string) (string, error) {
	if id == "" {
		return "", fmt.Errorf("opensearch: empty %s: %w", what, store.ErrInvalidArgument)
	}
	if len(id) > maxIDBytes {
		return "", fmt.Errorf("opensearch: %s of %d bytes exceeds the %d-byte document id limit: %w",
			what, len(id), maxIDBytes, store.ErrInvalidArgument)
	}
	return id, nil
}
