package main

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/agentbus/agentbus/orch"
	"github.com/agentbus/agentbus/skills/demo"
	"github.com/agentbus/agentbus/skills/oauthtest"
)

const (
	oauthClientID     = "agentbus-prod"
	oauthClientSecret = "cc-secret-7f3a91d2-never-logged"
)

// TestOAuth_ARunThroughASkillServiceThatRequiresClientCredentials: the
// demo Skill Service behind an OAuth resource server whose tokens live 2 s.
// The planner and the executor each get a token with the client
// credentials (discovered from the 401's metadata, the authorization
// server's loopback address allow-listed), the run completes; a
// second run after the tokens expired gets new ones before calling, so no
// call is refused for an expired token. The secret appears in no log.
func TestOAuth_ARunThroughASkillServiceThatRequiresClientCredentials(t *testing.T) {
	as := oauthtest.Start(t, &oauthtest.Server{ClientID: oauthClientID, ClientSecret: oauthClientSecret, Life: 2 * time.Second},
		demo.NewService(demo.Config{}).Handler())
	c := newCluster(t, demo.Config{}, "SKILL_SERVICE_URL="+as.ResourceURL+"/tenants/{tenant}/mcp",
		"SKILL_OAUTH_CLIENT_ID="+oauthClientID, "SKILL_OAUTH_CLIENT_SECRET="+oauthClientSecret,
		"EGRESS_ALLOW=127.0.0.1") // the authorization server the Skill Service names is on loopback
	procs := c.startAll(1)
	for i := range 2 {
		if i == 1 {
			time.Sleep(2500 * time.Millisecond) // every token has expired
		}
		res := postRun(t, c.ingURL, orch.RunRequest{TenantID: "demo", UserID: "u", SessionID: fmt.Sprintf("s-oauth-%d", i), Message: demoTask})
		if res.TerminalCode != orch.CodeSuccess {
			t.Fatalf("run %d ended %s: %s", i, res.TerminalCode, res.Response)
		}
	}
	if g, refused := as.Grants(), as.ExpiredRefusals(); g < 3 || refused != 0 {
		t.Errorf("%d token grants, %d calls refused for an expired token; want the planner's and the executor's first tokens and new ones before the second run's calls", g, refused)
	}
	for name, p := range procs {
		if strings.Contains(p.logs.String(), oauthClientSecret) {
			t.Errorf("the %s log holds the client secret", name)
		}
	}
}
