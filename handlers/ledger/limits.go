package ledger

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math"
	"time"

	json "github.com/go-json-experiment/json/v1"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/agentbus/agentbus/kvcas"
)

// BucketLimits holds the tenants' rate windows (rate.<tenant>) and their
// runs in flight (runs.<tenant>), shared by every ingress replica. An
// entry untouched for a day expires: by then its window and every lease
// in it are over.
const BucketLimits = "limits"

// ConfigKeyLimits is the config bucket's key of the per-tenant overrides
// of the request limits (LimitsPolicy), a JSON object.
const ConfigKeyLimits = "limits"

// Default request limits of a tenant (flags --rate-limit and
// --max-concurrent-runs override them for an ingress).
const (
	DefaultRequestsPerMinute = 60
	DefaultConcurrentRuns    = 10
	DefaultRunLeaseTTL       = 30 * time.Minute
)

// maxLeaseTTL bounds a lease by the limits bucket's entry TTL.
const maxLeaseTTL = 23 * time.Hour

// TenantLimits are a tenant's request limits; 0 is "not set" in an
// override and "unlimited" nowhere: a resolved limit is at least 1.
type TenantLimits struct {
	// RequestsPerMinute bounds the runs a tenant may submit in any
	// minute (a sliding window), across every ingress.
	RequestsPerMinute int `json:"requests_per_minute,omitempty"`
	// ConcurrentRuns bounds the tenant's runs in flight.
	ConcurrentRuns int `json:"concurrent_runs,omitempty"`
}

// LimitsPolicy is the config bucket's "limits" key: defaults replacing
// the ingress's own and per-tenant overrides.
type LimitsPolicy struct {
	Defaults TenantLimits            `json:"defaults,omitzero"`
	Tenants  map[string]TenantLimits `json:"tenants,omitempty"`
}

// Validate refuses negative limits.
func (p LimitsPolicy) Validate() error {
	check := func(where string, l TenantLimits) error {
		if l.RequestsPerMinute < 0 || l.ConcurrentRuns < 0 {
			return fmt.Errorf("limits %s: requests_per_minute and concurrent_runs must be at least 0", where)
		}
		return nil
	}
	if err := check("defaults", p.Defaults); err != nil {
		return err
	}
	for t, l := range p.Tenants {
		if err := check("tenants."+t, l); err != nil {
			return err
		}
	}
	return nil
}

// Limiter enforces the tenants' request rate and concurrent runs across
// every process that shares its bucket: each admission is a
// compare-and-swap on the tenant's entry, so no replica admits past a
// limit. A run's lease is released when it finishes (Release) and expires
// by itself after LeaseTTL, so a process that dies leaks no slot for
// longer than that. A nil Limiter admits everything.
type Limiter struct {
	KV jetstream.KeyValue // the limits bucket
	// Config, when set, holds the LimitsPolicy under ConfigKeyLimits.
	Config jetstream.KeyValue
	// Defaults apply where the policy sets nothing.
	Defaults TenantLimits
	LeaseTTL time.Duration // default DefaultRunLeaseTTL
	Now      func() time.Time
}

// Admission is the answer to Admit: allowed, or refused with a stable
// code (rate_limited, concurrency_limited), the limit and when to retry.
type Admission struct {
	Allowed    bool
	Code       string
	Message    string
	Limit      int
	RetryAfter time.Duration
	// Held: the run held a lease already (this admission renewed it).
	Held bool
}

// RetryAfterSeconds is Retry-After's value: whole seconds, at least 1.
func (a Admission) RetryAfterSeconds() int {
	return max(1, int(math.Ceil(a.RetryAfter.Seconds())))
}

type rateEntry struct {
	Window int64 `json:"window"` // unix seconds of the window's start
	Count  int   `json:"count"`
	// Prev is the count of the minute before Window (0 when that minute
	// saw none, or is older).
	Prev int `json:"prev,omitempty"`
}

// rateWindow is the length of a rate window.
const rateWindow = time.Minute

// roll moves e to the window starting at start, keeping the count of the
// minute just before it.
func (e *rateEntry) roll(start time.Time) {
	switch {
	case e.Window == start.Unix():
		return
	case e.Window == start.Add(-rateWindow).Unix():
		*e = rateEntry{Window: start.Unix(), Prev: e.Count}
	default:
		*e = rateEntry{Window: start.Unix()}
	}
}

// rate is the requests of the minute up to now: this window's, plus the
// last window's weighted by how much of it the minute still covers (the
// sliding-window estimate, which assumes the last window's requests came
// evenly). It bounds a burst across a window's turn by the limit, not
// twice it.
func (e rateEntry) rate(now time.Time) float64 {
	left := 1 - float64(now.Sub(time.Unix(e.Window, 0)))/float64(rateWindow)
	return float64(e.Prev)*left + float64(e.Count)
}

// retry is how long from now until one more request fits under limit,
// rounded up to the millisecond.
func (e rateEntry) retry(now time.Time, limit int) time.Duration {
	start := time.Unix(e.Window, 0)
	var at time.Time
	if e.Count < limit {
		// This window's count leaves room: wait for the last window's
		// weight to fall under it.
		f := 1 - float64(limit-e.Count-1)/float64(e.Prev)
		at = start.Add(time.Duration(f * float64(rateWindow)))
	} else {
		// This window is full: the next one starts with it as its
		// last, whose weight must fall under the limit.
		f := 1 - float64(limit-1)/float64(e.Count)
		at = start.Add(rateWindow + time.Duration(f*float64(rateWindow)))
	}
	return max(0, (at.Sub(now) + time.Millisecond - 1).Truncate(time.Millisecond))
}

type runsEntry struct {
	// Leases are the runs in flight: run id → lease expiry (unix ms).
	Leases map[string]int64 `json:"leases"`
}

// concurrencyRetry is the Retry-After of a concurrency refusal when no
// lease expires sooner: when a run ends is not known in advance.
const concurrencyRetry = 5 * time.Second

// Admit admits a request of the tenant and, when runID is set, its run:
// it takes a lease for the run among the tenant's concurrent runs, then
// draws one request from the tenant's rate window. A request refused for
// concurrency draws nothing from the rate (a client, or an inbound event
// redelivered after Retry-After, does not spend the rate by waiting for a
// slot); one refused for the rate gives back the lease it just took.
// Admitting a run id that holds a lease already is allowed (Held).
func (l *Limiter) Admit(ctx context.Context, tenant, runID string) (Admission, error) {
	if l == nil || l.KV == nil {
		return Admission{Allowed: true}, nil
	}
	lim, err := l.limitsOf(ctx, tenant)
	if err != nil {
		return Admission{}, err
	}
	now := l.now()
	var (
		refused *Admission
		held    bool
	)
	if runID != "" {
		expiry := now.Add(l.leaseTTL()).UnixMilli()
		_, err = kvcas.Update(ctx, l.KV, "runs."+tenant, func(e *runsEntry, _ uint64) (bool, error) {
			refused = nil
			pruneLeases(e, now)
			_, held = e.Leases[runID]
			if !held && len(e.Leases) >= lim.ConcurrentRuns {
				wait := concurrencyRetry
				for _, exp := range e.Leases {
					wait = min(wait, time.UnixMilli(exp).Sub(now))
				}
				refused = &Admission{Code: "concurrency_limited", Limit: lim.ConcurrentRuns, RetryAfter: wait,
					Message: fmt.Sprintf("the tenant's limit of %d concurrent runs is reached", lim.ConcurrentRuns)}
				return false, nil
			}
			e.Leases[runID] = expiry
			return true, nil
		})
		if err != nil || refused != nil {
			if refused != nil {
				return *refused, err
			}
			return Admission{}, err
		}
	}
	start := now.Truncate(rateWindow)
	_, err = kvcas.Update(ctx, l.KV, "rate."+tenant, func(e *rateEntry, _ uint64) (bool, error) {
		refused = nil
		e.roll(start)
		if e.rate(now)+1 > float64(lim.RequestsPerMinute)+1e-9 {
			refused = &Admission{Code: "rate_limited", Limit: lim.RequestsPerMinute, RetryAfter: e.retry(now, lim.RequestsPerMinute),
				Message: fmt.Sprintf("the tenant's limit of %d requests per minute is reached", lim.RequestsPerMinute)}
			return false, nil
		}
		e.Count++
		return true, nil
	})
	if (err != nil || refused != nil) && runID != "" && !held {
		// The run is not admitted: its slot goes back (if this fails,
		// the lease expires by itself).
		_ = l.Release(ctx, tenant, runID)
	}
	if refused != nil {
		return *refused, err
	}
	return Admission{Allowed: err == nil, Held: held}, err
}

// Release ends a run's lease; releasing a run that holds none does
// nothing (every ingress releases every finished run).
func (l *Limiter) Release(ctx context.Context, tenant, runID string) error {
	if l == nil || l.KV == nil {
		return nil
	}
	now := l.now()
	_, err := kvcas.Update(ctx, l.KV, "runs."+tenant, func(e *runsEntry, _ uint64) (bool, error) {
		if _, held := e.Leases[runID]; !held {
			return false, nil
		}
		delete(e.Leases, runID)
		pruneLeases(e, now)
		return true, nil
	})
	return err
}

// InFlight is the number of the tenant's runs holding a live lease.
func (l *Limiter) InFlight(ctx context.Context, tenant string) (int, error) {
	if l == nil || l.KV == nil {
		return 0, nil
	}
	var n int
	_, err := kvcas.Update(ctx, l.KV, "runs."+tenant, func(e *runsEntry, _ uint64) (bool, error) {
		pruneLeases(e, l.now())
		n = len(e.Leases)
		return false, nil
	})
	return n, err
}

func pruneLeases(e *runsEntry, now time.Time) {
	if e.Leases == nil {
		e.Leases = map[string]int64{}
	}
	for id, exp := range e.Leases {
		if exp <= now.UnixMilli() {
			delete(e.Leases, id)
		}
	}
}

// limitsOf resolves a tenant's limits: the policy's tenant override, then
// its defaults, then the Limiter's, then the package defaults. An invalid
// policy is an error: requests are refused 503 until it is fixed rather
// than admitted without the limits it was meant to set.
func (l *Limiter) limitsOf(ctx context.Context, tenant string) (TenantLimits, error) {
	var p LimitsPolicy
	if l.Config != nil {
		e, err := l.Config.Get(ctx, ConfigKeyLimits)
		switch {
		case errors.Is(err, jetstream.ErrKeyNotFound):
		case err != nil:
			return TenantLimits{}, fmt.Errorf("handlers: config %s: %w", ConfigKeyLimits, err)
		default:
			dec := json.NewDecoder(bytes.NewReader(e.Value()))
			dec.DisallowUnknownFields()
			if err := dec.Decode(&p); err != nil {
				return TenantLimits{}, fmt.Errorf("handlers: config %s: %w", ConfigKeyLimits, err)
			}
			if err := p.Validate(); err != nil {
				return TenantLimits{}, fmt.Errorf("handlers: config %s: %w", ConfigKeyLimits, err)
			}
		}
	}
	first := func(vs ...int) int {
		for _, v := range vs {
			if v > 0 {
				return v
			}
		}
		return 1
	}
	t := p.Tenants[tenant]
	return TenantLimits{
		RequestsPerMinute: first(t.RequestsPerMinute, p.Defaults.RequestsPerMinute, l.Defaults.RequestsPerMinute, DefaultRequestsPerMinute),
		ConcurrentRuns:    first(t.ConcurrentRuns, p.Defaults.ConcurrentRuns, l.Defaults.ConcurrentRuns, DefaultConcurrentRuns),
	}, nil
}

func (l *Limiter) leaseTTL() time.Duration {
	if l.LeaseTTL <= 0 {
		return DefaultRunLeaseTTL
	}
	return min(l.LeaseTTL, maxLeaseTTL)
}

func (l *Limiter) now() time.Time {
	if l.Now != nil {
		return l.Now()
	}
	return time.Now()
}
