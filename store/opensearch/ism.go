package opensearch

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/opensearch-project/opensearch-go/v4/opensearchapi"
	"github.com/opensearch-project/opensearch-go/v4/plugins/ism"
)

// rolloverAge is how old the events write index gets before ISM rolls it
// over; retention is counted from the rollover, so an event is kept at
// least EventRetention and at most EventRetention + rolloverAge.
const rolloverAge = 24 * time.Hour

// policyDescription identifies the policy's content: New updates the
// stored policy when it differs (for example a changed retention).
func policyDescription(cfg Config) string {
	return fmt.Sprintf("agentbus agent_events retention v1: rollover after %s, delete %s after rollover",
		ismDuration(min(rolloverAge, cfg.EventRetention)), ismDuration(cfg.EventRetention))
}

// RetentionPolicy returns the ISM policy the store installs for the
// agent_events backing indices: a "hot" state that rolls the write index
// over daily (or after EventRetention if shorter), and a "delete" state
// entered EventRetention after the rollover. Its ism_template attaches it
// to every new backing index.
func RetentionPolicy(cfg Config) ism.PolicyBody {
	cfg = cfg.withDefaults()
	n := newNames(cfg.IndexPrefix)
	return ism.PolicyBody{
		Description:  policyDescription(cfg),
		DefaultState: "hot",
		States: []ism.PolicyState{
			{
				Name: "hot",
				Actions: []ism.PolicyStateAction{{
					Rollover: &ism.PolicyStateRollover{MinIndexAge: ismDuration(min(rolloverAge, cfg.EventRetention))},
				}},
				Transitions: &[]ism.PolicyStateTransition{{
					StateName:  "delete",
					Conditions: &ism.PolicyStateTransitionCondition{MinRolloverAge: ismDuration(cfg.EventRetention)},
				}},
			},
			{
				Name:        "delete",
				Actions:     []ism.PolicyStateAction{{Delete: &ism.PolicyStateDelete{}}},
				Transitions: &[]ism.PolicyStateTransition{},
			},
		},
		Template: []ism.Template{{IndexPatterns: []string{n.events + "-*"}, Priority: 100}},
	}
}

// ismDuration formats d in the largest OpenSearch time unit dividing it.
func ismDuration(d time.Duration) string {
	for _, u := range []struct {
		unit time.Duration
		name string
	}{{24 * time.Hour, "d"}, {time.Hour, "h"}, {time.Minute, "m"}, {time.Second, "s"}} {
		if d%u.unit == 0 {
			return strconv.FormatInt(int64(d/u.unit), 10) + u.name
		}
	}
	return strconv.FormatInt(d.Milliseconds(), 10) + "ms"
}

// ensurePolicy creates the retention policy, or updates it when its
// description (hence its content) differs. Indices already managed keep
// the policy version they started with until their next state change.
func (s *Store) ensurePolicy(ctx context.Context) error {
	return s.putPolicy(ctx, s.names.eventsPolicy, RetentionPolicy(s.cfg))
}

// putPolicy creates the ISM policy id as want, or updates it when its
// description (hence its content) differs.
func (s *Store) putPolicy(ctx context.Context, id string, want ism.PolicyBody) error {
	got, err := s.ism.Policies.Get(ctx, &ism.PoliciesGetReq{Policy: id})
	var params ism.PoliciesPutParams
	switch {
	case status(got.Inspect().Response) == http.StatusNotFound:
	case status(got.Inspect().Response) == http.StatusOK && got.Policy != nil:
		if got.Policy.Description == want.Description {
			return nil
		}
		params = ism.PoliciesPutParams{IfSeqNo: got.SeqNo, IfPrimaryTerm: got.PrimaryTerm}
	default:
		return check(got.Inspect().Response, err, "get ISM policy "+id)
	}
	put, err := s.ism.Policies.Put(ctx, ism.PoliciesPutReq{
		Policy: id,
		Body:   ism.PoliciesPutBody{Policy: want},
		Params: params,
	})
	if status(put.Inspect().Response) == http.StatusConflict {
		return nil // a concurrent New wrote it
	}
	return check(put.Inspect().Response, err, "put ISM policy "+id)
}

// manageEventIndices attaches the policy to backing indices that are not
// managed yet (created before ISM was installed) and gives them the
// rollover alias setting ISM's rollover needs. New backing indices get
// both from the policy's ism_template and the index template.
func (s *Store) manageEventIndices(ctx context.Context) error {
	pattern := s.names.events + "-*"
	explain, err := s.ism.Explain(ctx, &ism.ExplainReq{Indices: []string{pattern}})
	if err := check(explain.Inspect().Response, err, "explain ISM of "+pattern); err != nil {
		return err
	}
	var unmanaged []string
	for name, item := range explain.Indices {
		if item.PluginPolicyID == nil || *item.PluginPolicyID == "" {
			unmanaged = append(unmanaged, name)
		}
	}
	if len(unmanaged) == 0 {
		return nil
	}
	r, err := jsonBody(obj{"index": obj{"plugins.index_state_management.rollover_alias": s.names.events}})
	if err != nil {
		return err
	}
	sresp, err := s.api.Indices.Settings.Put(ctx, opensearchapi.SettingsPutReq{Indices: unmanaged, Body: r})
	if err := check(sresp.Inspect().Response, err, "set rollover alias"); err != nil {
		return err
	}
	add, err := s.ism.Add(ctx, ism.AddReq{Indices: unmanaged, Body: ism.AddBody{PolicyID: s.names.eventsPolicy}})
	if err := check(add.Inspect().Response, err, "attach ISM policy"); err != nil {
		return err
	}
	if add.Failures {
		return fmt.Errorf("opensearch: attach ISM policy %s: %+v", s.names.eventsPolicy, add.FailedIndices)
	}
	return nil
}
