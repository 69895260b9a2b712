package egress_test

import (
	"errors"
	"net/netip"
	"strings"
	"testing"

	"github.com/agentbus/agentbus/egress"
)

// TestRefusedRanges: the default policy refuses every address that
// reaches inside a deployment, in IPv4, IPv6 and the IPv6 forms that
// carry an IPv4 address, and allows public addresses.
func TestRefusedRanges(t *testing.T) {
	cases := []struct{ addr, want string }{
		{"127.0.0.1", "loopback"},
		{"127.255.0.9", "loopback"},
		{"::1", "loopback"},
		{"::ffff:127.0.0.1", "loopback"}, // IPv4-mapped
		{"::127.0.0.1", "loopback"},      // IPv4-compatible
		{"169.254.169.254", "link-local"},
		{"::ffff:169.254.169.254", "link-local"},
		{"64:ff9b::a9fe:a9fe", "link-local"}, // NAT64 of 169.254.169.254
		{"2002:a9fe:a9fe::1", "link-local"},  // 6to4 of 169.254.169.254
		{"fe80::1", "link-local"},
		{"fe80::1%eth0", "link-local"},
		{"fd00:ec2::254", "private"}, // the IPv6 cloud metadata endpoint
		{"10.0.0.1", "private"},
		{"172.16.0.1", "private"},
		{"172.31.255.255", "private"},
		{"192.168.1.1", "private"},
		{"::ffff:10.1.2.3", "private"},
		{"fc00::1", "private"},
		{"fec0::1", "private"},
		{"64:ff9b:1::a00:1", "private"},
		{"100.64.0.1", "shared"},
		{"100.127.255.254", "shared"},
		{"224.0.0.1", "multicast"},
		{"239.255.255.250", "multicast"},
		{"ff02::1", "multicast"},
		{"ff05::2", "multicast"},
		{"0.0.0.0", "unspecified"},
		{"0.1.2.3", "unspecified"},
		{"::", "unspecified"},
		{"::ffff:0.0.0.0", "unspecified"},
		{"255.255.255.255", "reserved"},
		{"240.0.0.1", "reserved"},
		{"192.0.0.170", "reserved"},
		{"198.18.0.1", "reserved"},
		{"100::1", "reserved"},
		// public addresses
		{"93.184.216.34", ""},
		{"8.8.8.8", ""},
		{"100.63.255.255", ""},
		{"100.128.0.0", ""},
		{"172.32.0.1", ""},
		{"::ffff:8.8.8.8", ""},
		{"64:ff9b::808:808", ""},
		{"2606:4700:4700::1111", ""},
		{"2001:4860:4860::8888", ""},
	}
	for _, c := range cases {
		a := netip.MustParseAddr(c.addr)
		if got := egress.RefusedRange(a); got != c.want {
			t.Errorf("RefusedRange(%s) = %q, want %q", c.addr, got, c.want)
		}
		err := egress.Default().Check("", a)
		var nilPolicy *egress.Policy
		if (err == nil) != (c.want == "") || (nilPolicy.Check("", a) == nil) != (c.want == "") {
			t.Errorf("Check(%s) = %v", c.addr, err)
		}
		if c.want != "" && (!errors.Is(err, egress.ErrDenied) || !strings.HasPrefix(err.Error(), "egress_denied: ")) {
			t.Errorf("Check(%s): %v is not an egress_denied refusal", c.addr, err)
		}
	}
}

// TestAllowList: the allow-list's prefixes open addresses of refused
// ranges (an IPv4 prefix opens the mapped form too), its names open
// hosts by name (a wildcard its subdomains, not itself); what it does
// not name stays refused; a malformed entry is an error naming it.
func TestAllowList(t *testing.T) {
	if _, err := egress.Parse(" 127.0.0.0/8, fd00::7 ,hooks.internal, *.corp.example, 10.1.2.3."); err == nil {
		t.Fatal("an IP address with a trailing dot parsed")
	}
	p, err := egress.Parse(" 127.0.0.0/8, fd00::7 ,Hooks.Internal, *.corp.example,,10.1.2.3")
	if err != nil {
		t.Fatal(err)
	}
	for addr, allowed := range map[string]bool{
		"127.0.0.1": true, "::ffff:127.0.0.9": true, "fd00::7": true, "10.1.2.3": true,
		"10.1.2.4": false, "::1": false, "fd00::8": false, "169.254.169.254": false, "8.8.8.8": true,
	} {
		if err := p.Check("", netip.MustParseAddr(addr)); (err == nil) != allowed {
			t.Errorf("Check(%s) = %v, want allowed %v", addr, err, allowed)
		}
	}
	for host, allowed := range map[string]bool{
		"hooks.internal": true, "HOOKS.internal.": true, "a.corp.example": true, "b.a.corp.example": true,
		"corp.example": false, "xcorp.example": false, "other.internal": false, "127.0.0.1": false,
	} {
		if got := p.AllowsHost(host); got != allowed {
			t.Errorf("AllowsHost(%s) = %v", host, got)
		}
	}
	for _, bad := range []string{"10.0.0.0/33", "http://hooks.internal", "hooks.internal:443", "-bad.example", "a..b", "fe80::1%eth0", "*"} {
		if _, err := egress.Parse(bad); !errors.Is(err, egress.ErrAllowList) || !strings.Contains(err.Error(), bad) {
			t.Errorf("Parse(%q) = %v", bad, err)
		}
	}
	if p, err := egress.Parse(" , "); err != nil || p.Check("", netip.MustParseAddr("127.0.0.1")) == nil {
		t.Errorf("an empty list: %v", err)
	}
	q, err := p.With("192.168.0.10", "api.internal")
	if err != nil || q.Check("", netip.MustParseAddr("192.168.0.10")) != nil || !q.AllowsHost("api.internal") || !q.AllowsHost("hooks.internal") ||
		p.AllowsHost("api.internal") || p.Check("", netip.MustParseAddr("192.168.0.10")) == nil {
		t.Errorf("With: %v", err)
	}
}
