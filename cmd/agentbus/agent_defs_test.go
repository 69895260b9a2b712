package main

import (
	"path/filepath"
	"strings"
	"testing"
	"time"

	json "github.com/go-json-experiment/json/v1"

	"github.com/agentbus/agentbus/orch"
	"github.com/agentbus/agentbus/store"
)

// cliJSON runs the agentbus CLI and decodes its JSON answer; it wants
// exit code want.
func cliJSON(t *testing.T, want int, args ...string) map[string]any {
	t.Helper()
	code, out := runBinary(t, filepath.Join(binaries(t), "agentbus"), nil, args...)
	if code != want {
		t.Fatalf("agentbus %v exited %d, want %d: %s", args, code, want, out)
	}
	var m map[string]any
	if want == 0 {
		if err := json.Unmarshal([]byte(strings.TrimSpace(out)), &m); err != nil {
			t.Fatalf("agentbus %v answered %q: %v", args, out, err)
		}
	}
	return m
}

// TestAgentAndSkillCLI: skills are a definition kind with CRUD through
// the CLI (agentbus skill) over the HTTP API, tenant scoped; an agent
// created with the CLI lists one and has Handoffs stages; a skill in use
// cannot be deleted. A router agent created with the CLI hands a message
// posted to POST /agent/run to the sub-agent whose description fits it
// (the offline model classifies), recorded as agent.routed.
func TestAgentAndSkillCLI(t *testing.T) {
	s := startStack(t)
	url := "http://" + s.IngressAddr
	sk := cliJSON(t, 0, "skill", "create", "--url", url, "--tenant", "demo",
		`{"name":"refund_processor","description":"Process refund requests","prompt":"Verify eligibility first.","tools":["outlet_list"]}`)
	skillID, _ := sk["skill_id"].(string)
	if !strings.HasPrefix(skillID, "skill-") || sk["version"] != float64(1) || sk["status"] != "active" {
		t.Fatalf("created %v", sk)
	}
	up := cliJSON(t, 0, "skill", "update", "--url", url, "--tenant", "demo", skillID,
		`{"name":"refund_processor","description":"Process refund requests","prompt":"Verify eligibility, then refund.","tools":["outlet_list"]}`)
	if up["version"] != float64(2) || up["prompt"] != "Verify eligibility, then refund." {
		t.Fatalf("updated %v", up)
	}
	if list := cliJSON(t, 0, "skill", "list", "--url", url, "--tenant", "demo"); len(list["skills"].([]any)) != 1 {
		t.Fatalf("list %v", list)
	}
	cliJSON(t, 1, "skill", "get", "--url", url, "--tenant", "other", skillID) // another tenant's: 404
	cliJSON(t, 1, "skill", "create", "--url", url, "--tenant", "demo",
		`{"name":"refund_processor","description":"again","prompt":"x"}`) // 409 skill_name_taken

	ag := cliJSON(t, 0, "agent", "create", "--url", url, "--tenant", "demo", `{"name":"Support","system_prompt":"Help.",`+
		`"tools":["outlet_list","engagement_analytics"],"skills":["`+skillID+`"],"steps":[`+
		`{"step_id":"triage","name":"Triage","system_prompt":"Triage.","tools":["outlet_list"],"transition_tools":["transition_to_billing"],"is_initial":true},`+
		`{"step_id":"billing","name":"Billing","system_prompt":"Bill.","tools":["engagement_analytics"],"transition_tools":["escalate_to_human"],"is_final":true}]}`)
	agentID, _ := ag["agent_id"].(string)
	cliJSON(t, 1, "agent", "create", "--url", url, "--tenant", "demo",
		`{"name":"Bad","system_prompt":"x","skills":["skill-missing"]}`) // 400 unknown_skill
	cliJSON(t, 1, "skill", "delete", "--url", url, "--tenant", "demo", skillID) // 409 skill_in_use
	cliJSON(t, 0, "agent", "delete", "--url", url, "--tenant", "demo", agentID)
	if del := cliJSON(t, 0, "skill", "delete", "--url", url, "--tenant", "demo", skillID); del["deleted"] != true {
		t.Fatalf("delete %v", del)
	}

	outlets := cliJSON(t, 0, "agent", "create", "--url", url, "--tenant", "demo", `{"name":"Outlets",`+
		`"description":"outlets: which outlets are active, where they are","system_prompt":"List outlets.","tools":["outlet_list"]}`)
	menus := cliJSON(t, 0, "agent", "create", "--url", url, "--tenant", "demo", `{"name":"Menus",`+
		`"description":"menus: dishes, prices and allergens of the menu catalog","system_prompt":"Answer on menus.","tools":["menu_catalog"]}`)
	front := cliJSON(t, 0, "agent", "create", "--url", url, "--tenant", "demo", `{"name":"Front desk","type":"router",`+
		`"system_prompt":"Route.","sub_agents":["`+menus["agent_id"].(string)+`","`+outlets["agent_id"].(string)+`"]}`)
	res := postRun(t, url, orch.RunRequest{TenantID: "demo", UserID: "u1", SessionID: "sess-front-1",
		Message: "List the active outlets", AgentID: front["agent_id"].(string)})
	if res.TerminalCode != orch.CodeSuccess || !strings.Contains(res.Response, "out-") && !strings.Contains(strings.ToLower(res.Response), "outlet") {
		t.Fatalf("the router agent's run ended %s: %s", res.TerminalCode, res.Response)
	}
	eventually(t, 10*time.Second, "agent.routed to the outlets agent in the trace", func() bool {
		var tr struct {
			Events []store.Event `json:"events"`
		}
		if !tryGetJSON(t, url+"/agent/plans/"+res.PlanID+"/trace", &tr) {
			return false
		}
		for _, ev := range tr.Events {
			var p map[string]any
			if ev.EventType == "agent.routed" && json.Unmarshal(ev.Payload, &p) == nil {
				return p["agent_id"] == outlets["agent_id"]
			}
		}
		return false
	})
}
