package demo

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	json "github.com/go-json-experiment/json/v1"

	"github.com/agentbus/agentbus/skills"
)

func callOutlets(t *testing.T, c *skills.Client, args string) []outlet {
	t.Helper()
	out, err := c.Call(testCtx(t), "beta", SkillOutletList, json.RawMessage(args), "")
	if err != nil {
		t.Fatalf("Call(outlet_list, %s): %v", args, err)
	}
	var res struct {
		Outlets []outlet `json:"outlets"`
	}
	if err := json.Unmarshal(out, &res); err != nil {
		t.Fatalf("decode %s: %v", out, err)
	}
	return res.Outlets
}

func TestCallOutletList(t *testing.T) {
	env := newTestEnv(t, Config{}, skills.Config{}, nil)
	active := callOutlets(t, env.client, `{"status":"active"}`)
	if len(active) != 8 {
		t.Fatalf("active outlets = %d, want 8", len(active))
	}
	for _, o := range active {
		if o.Status != "active" || o.OutletID == "" || o.Name == "" || o.City == "" {
			t.Fatalf("bad outlet %+v", o)
		}
	}
	if all := callOutlets(t, env.client, ``); len(all) != 12 {
		t.Fatalf("all outlets = %d, want 12", len(all))
	}
	if inactive := callOutlets(t, env.client, `{"status":"inactive"}`); len(inactive) != 4 {
		t.Fatalf("inactive outlets = %d, want 4", len(inactive))
	}
	_, err := env.client.Call(testCtx(t), "beta", SkillOutletList, json.RawMessage(`{"status":"closed"}`), "")
	if !errors.Is(err, skills.ErrSkillFailed) {
		t.Fatalf("bad status err = %v, want ErrSkillFailed", err)
	}
	_, err = env.client.Call(testCtx(t), "beta", SkillOutletList, json.RawMessage(`[1]`), "")
	if !errors.Is(err, skills.ErrInvalidArguments) {
		t.Fatalf("array args err = %v, want ErrInvalidArguments", err)
	}
}

func TestCallEngagementAnalytics(t *testing.T) {
	env := newTestEnv(t, Config{}, skills.Config{}, nil)
	ctx := testCtx(t)
	ids := make([]string, 0, len(demoOutlets))
	for _, o := range demoOutlets {
		ids = append(ids, o.OutletID)
	}
	args, _ := json.Marshal(map[string]any{"outlet_ids": ids})
	first, err := env.client.Call(ctx, "beta", SkillEngagementAnalytics, args, "")
	if err != nil {
		t.Fatal(err)
	}
	var res struct {
		Results []engagementResult `json:"results"`
	}
	if err := json.Unmarshal(first, &res); err != nil {
		t.Fatal(err)
	}
	if len(res.Results) != len(ids) {
		t.Fatalf("got %d results, want %d", len(res.Results), len(ids))
	}
	for i, r := range res.Results {
		if r.Rank != i+1 {
			t.Fatalf("result %d has rank %d", i, r.Rank)
		}
		if r.Score < 0 || r.Score > 100 || r.Score*10 != float64(int(r.Score*10+0.5)) {
			t.Fatalf("bad score %v", r.Score)
		}
		if i > 0 && res.Results[i-1].Score < r.Score {
			t.Fatalf("not sorted by score desc: %+v", res.Results)
		}
		if r.Name == "" {
			t.Fatalf("missing name in %+v", r)
		}
	}
	second, err := env.client.Call(ctx, "beta", SkillEngagementAnalytics, args, "")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(first, second) {
		t.Fatalf("engagement_analytics is not deterministic:\n%s\n%s", first, second)
	}
	_, err = env.client.Call(ctx, "beta", SkillEngagementAnalytics, json.RawMessage(`{"outlet_ids":["out-001","out-999"]}`), "")
	if !errors.Is(err, skills.ErrSkillFailed) || !strings.Contains(err.Error(), "out-999") {
		t.Fatalf("unknown outlet err = %v, want ErrSkillFailed naming out-999", err)
	}
}

func TestMenuCatalogSize(t *testing.T) {
	env := newTestEnv(t, Config{}, skills.Config{}, nil)
	ctx := testCtx(t)
	for _, args := range []string{`{}`, `{"outlet_id":"out-004"}`} {
		out, err := env.client.Call(ctx, "beta", SkillMenuCatalog, json.RawMessage(args), "")
		if err != nil {
			t.Fatal(err)
		}
		if len(out) < 900_000 || len(out) > 1_200_000 {
			t.Fatalf("menu_catalog(%s) is %d bytes, want 900KB..1.2MB", args, len(out))
		}
		var res struct {
			Items []menuItem `json:"items"`
		}
		if err := json.Unmarshal(out, &res); err != nil {
			t.Fatal(err)
		}
		if len(res.Items) != menuItemCount || res.Items[0].Description == "" || res.Items[0].Allergens == nil {
			t.Fatalf("unexpected items: %d, first %+v", len(res.Items), res.Items[0])
		}
	}
	_, err := env.client.Call(ctx, "beta", SkillMenuCatalog, json.RawMessage(`{"outlet_id":"nope"}`), "")
	if !errors.Is(err, skills.ErrSkillFailed) {
		t.Fatalf("unknown outlet err = %v, want ErrSkillFailed", err)
	}
}
