package demo

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"math"
	"sort"
	"strings"

	json "github.com/go-json-experiment/json/v1"

	"github.com/agentbus/agentbus/skills"
	"github.com/agentbus/agentbus/text"
)

// Names of the demo skills.
const (
	// SkillOutletList lists the brand's outlets, optionally by status.
	SkillOutletList = "outlet_list"
	// SkillEngagementAnalytics scores and ranks outlets by engagement.
	SkillEngagementAnalytics = "engagement_analytics"
	// SkillMenuCatalog returns the ~1 MB menu catalog.
	SkillMenuCatalog = "menu_catalog"
	// SkillAcmeLoyaltyReport is private to tenant "acme".
	SkillAcmeLoyaltyReport = "acme_loyalty_report"
)

// allSkills returns every demo skill, public and private.
func allSkills() []*catalogSkill {
	return []*catalogSkill{
		{
			name:        SkillOutletList,
			description: "List the brand's outlets (stores) with their status",
			input: json.RawMessage(`{"type":"object","properties":{` +
				`"status":{"type":"string","enum":["active","inactive","all"],"description":"Only outlets with this status (default all)"}}}`),
			output: json.RawMessage(`{"type":"object","properties":{"outlets":{"type":"array","items":{"type":"object","properties":{` +
				`"outlet_id":{"type":"string"},"name":{"type":"string"},"city":{"type":"string"},` +
				`"status":{"type":"string","enum":["active","inactive"]}},` +
				`"required":["outlet_id","name","city","status"]}}},"required":["outlets"]}`),
			run: runOutletList,
		},
		{
			name:        SkillEngagementAnalytics,
			description: "Compute customer engagement scores for outlets and rank them",
			input: json.RawMessage(`{"type":"object","properties":{` +
				`"outlet_ids":{"type":"array","items":{"type":"string"},"minItems":1,"description":"Outlets to score"}},` +
				`"required":["outlet_ids"]}`),
			output: json.RawMessage(`{"type":"object","properties":{"results":{"type":"array","items":{"type":"object","properties":{` +
				`"outlet_id":{"type":"string"},"name":{"type":"string"},` +
				`"score":{"type":"number","minimum":0,"maximum":100},"rank":{"type":"integer","minimum":1}},` +
				`"required":["outlet_id","name","score","rank"]}}},"required":["results"]}`),
			run: runEngagementAnalytics,
		},
		{
			name:        SkillMenuCatalog,
			description: "Return the full menu catalog of an outlet with every item",
			input: json.RawMessage(`{"type":"object","properties":{` +
				`"outlet_id":{"type":"string","description":"Outlet whose prices to use (default: brand list prices)"}}}`),
			output: json.RawMessage(`{"type":"object","properties":{"items":{"type":"array","items":{"type":"object","properties":{` +
				`"item_id":{"type":"string"},"name":{"type":"string"},"category":{"type":"string"},` +
				`"description":{"type":"string"},"price":{"type":"number"},` +
				`"allergens":{"type":"array","items":{"type":"string"}}},` +
				`"required":["item_id","name","category","description","price","allergens"]}}},"required":["items"]}`),
			run: runMenuCatalog,
		},
		{
			name:        SkillAcmeLoyaltyReport,
			description: "Loyalty programme report for acme members",
			owner:       "acme",
			input:       json.RawMessage(`{"type":"object","properties":{}}`),
			output: json.RawMessage(`{"type":"object","properties":{"members":{"type":"integer"},` +
				`"tier_counts":{"type":"object","additionalProperties":{"type":"integer"}}},` +
				`"required":["members","tier_counts"]}`),
			run: runAcmeLoyaltyReport,
		},
	}
}

// rankSkills returns the skills with a positive relevance to query, best
// first (ties broken by name), or every skill when none has, each followed by the skills that produce
// its required inputs when they did not rank: a task about engagement
// scores needs the outlet list that provides the outlet ids.
func rankSkills(query string, catalog []*catalogSkill) []skills.Summary {
	items := make([]skills.Summary, 0, len(catalog))
	for _, sk := range catalog {
		items = append(items, skills.Summary{Name: sk.name, Description: sk.description,
			Keywords: text.SchemaWords(sk.input) + " " + text.SchemaWords(sk.output)})
	}
	ranked := skills.Rank(query, items)
	if len(ranked) == 0 {
		// Nothing matched: the catalog is small, so the model sees all
		// there is (at score 0) and can say what it looked at.
		for _, it := range items {
			ranked = append(ranked, skills.Summary{Name: it.Name, Description: it.Description})
		}
	}
	in := map[string]bool{}
	for _, r := range ranked {
		in[r.Name] = true
	}
	out := make([]skills.Summary, 0, len(catalog))
	for _, r := range ranked {
		out = append(out, r)
		for _, p := range producers(r.Name, catalog) {
			if !in[p.name] {
				in[p.name] = true
				out = append(out, skills.Summary{Name: p.name, Description: p.description, Score: r.Score / 2})
			}
		}
	}
	return out
}

// producers are the catalog skills whose output holds a field a required
// input of skill name is made of (outlet_ids from outlets[].outlet_id).
func producers(name string, catalog []*catalogSkill) []*catalogSkill {
	var required []string
	for _, sk := range catalog {
		if sk.name == name {
			var in struct {
				Required []string `json:"required"`
			}
			_ = json.Unmarshal(sk.input, &in)
			required = in.Required
		}
	}
	var out []*catalogSkill
	for _, sk := range catalog {
		words := " " + text.SchemaWords(sk.output) + " "
		for _, field := range required {
			if sk.name != name && (strings.Contains(words, " "+field+" ") || strings.Contains(words, " "+strings.TrimSuffix(field, "s")+" ")) {
				out = append(out, sk)
				break
			}
		}
	}
	return out
}

// outlet is one demo outlet.
type outlet struct {
	OutletID string `json:"outlet_id"`
	Name     string `json:"name"`
	City     string `json:"city"`
	Status   string `json:"status"`
}

// demoOutlets is the fixed outlet list: 12 outlets, 8 of them active.
var demoOutlets = []outlet{
	{"out-001", "Harbour Front", "Sydney", "active"},
	{"out-002", "Central Station", "Melbourne", "active"},
	{"out-003", "Old Town Square", "Brisbane", "inactive"},
	{"out-004", "Riverside Walk", "Perth", "active"},
	{"out-005", "Market Lane", "Adelaide", "active"},
	{"out-006", "Airport Terminal 2", "Sydney", "active"},
	{"out-007", "University Quarter", "Canberra", "inactive"},
	{"out-008", "Beach Road", "Gold Coast", "active"},
	{"out-009", "Northgate Mall", "Melbourne", "active"},
	{"out-010", "Hillside Plaza", "Hobart", "inactive"},
	{"out-011", "Docklands Pier", "Melbourne", "active"},
	{"out-012", "Garden City", "Darwin", "inactive"},
}

// findOutlet returns the outlet with id.
func findOutlet(id string) (outlet, bool) {
	for _, o := range demoOutlets {
		if o.OutletID == id {
			return o, true
		}
	}
	return outlet{}, false
}

// decodeArgs decodes skill arguments into v. Unknown fields are ignored, as
// the input schemas allow additional properties.
func decodeArgs(args json.RawMessage, v any) error {
	if err := json.Unmarshal(args, v); err != nil {
		return fmt.Errorf("invalid arguments: %w", err)
	}
	return nil
}

func runOutletList(_ context.Context, args json.RawMessage) (any, error) {
	var in struct {
		Status string `json:"status"`
	}
	if err := decodeArgs(args, &in); err != nil {
		return nil, err
	}
	switch in.Status {
	case "":
		in.Status = "all"
	case "active", "inactive", "all":
	default:
		return nil, fmt.Errorf("invalid arguments: status must be one of active, inactive, all")
	}
	outlets := make([]outlet, 0, len(demoOutlets))
	for _, o := range demoOutlets {
		if in.Status == "all" || o.Status == in.Status {
			outlets = append(outlets, o)
		}
	}
	return map[string][]outlet{"outlets": outlets}, nil
}

// engagementResult is one row of engagement_analytics.
type engagementResult struct {
	OutletID string  `json:"outlet_id"`
	Name     string  `json:"name"`
	Score    float64 `json:"score"`
	Rank     int     `json:"rank"`
}

// engagementScore is a deterministic score in [0, 99.9] with one decimal,
// derived from a hash of the outlet id.
func engagementScore(outletID string) float64 {
	return float64(hash64("engagement:"+outletID)%1000) / 10
}

func runEngagementAnalytics(_ context.Context, args json.RawMessage) (any, error) {
	var in struct {
		OutletIDs []string `json:"outlet_ids"`
	}
	if err := decodeArgs(args, &in); err != nil {
		return nil, err
	}
	if len(in.OutletIDs) == 0 {
		return nil, errors.New("invalid arguments: outlet_ids must list at least one outlet")
	}
	var unknown []string
	seen := make(map[string]bool, len(in.OutletIDs))
	results := make([]engagementResult, 0, len(in.OutletIDs))
	for _, id := range in.OutletIDs {
		if seen[id] {
			continue
		}
		seen[id] = true
		o, ok := findOutlet(id)
		if !ok {
			unknown = append(unknown, id)
			continue
		}
		results = append(results, engagementResult{OutletID: id, Name: o.Name, Score: engagementScore(id)})
	}
	if len(unknown) > 0 {
		return nil, fmt.Errorf("unknown outlet ids: %s", strings.Join(unknown, ", "))
	}
	sort.Slice(results, func(i, j int) bool {
		if results[i].Score != results[j].Score {
			return results[i].Score > results[j].Score
		}
		return results[i].OutletID < results[j].OutletID
	})
	for i := range results {
		results[i].Rank = i + 1
	}
	return map[string][]engagementResult{"results": results}, nil
}

func runAcmeLoyaltyReport(_ context.Context, args json.RawMessage) (any, error) {
	var in struct{}
	if err := decodeArgs(args, &in); err != nil {
		return nil, err
	}
	tiers := map[string]int{"bronze": 31250, "silver": 11874, "gold": 4312, "platinum": 777}
	members := 0
	for _, n := range tiers {
		members += n
	}
	return map[string]any{"members": members, "tier_counts": tiers}, nil
}

func runMenuCatalog(_ context.Context, args json.RawMessage) (any, error) {
	var in struct {
		OutletID string `json:"outlet_id"`
	}
	if err := decodeArgs(args, &in); err != nil {
		return nil, err
	}
	if in.OutletID != "" {
		if _, ok := findOutlet(in.OutletID); !ok {
			return nil, fmt.Errorf("unknown outlet id: %s", in.OutletID)
		}
	}
	return map[string][]menuItem{"items": menuItems(in.OutletID)}, nil
}

// hash64 is a well-mixed deterministic hash of s: FNV-1a followed by the
// SplitMix64 finalizer, so that ids differing in one character differ in
// every bit range.
func hash64(s string) uint64 {
	h := fnv.New64a()
	_, _ = h.Write([]byte(s))
	x := h.Sum64()
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	x ^= x >> 31
	return x
}

// round2 rounds v to two decimals.
func round2(v float64) float64 {
	return math.Round(v*100) / 100
}
