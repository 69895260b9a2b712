package egress

import (
	"errors"
	"fmt"
	"net/netip"
	"strings"
)

// Code is the error code of a refusal, as a tool error and an HTTP
// answer carry it.
const Code = "egress_denied"

// ErrDenied reports a connection the policy refused. A *DeniedError
// matches it.
var ErrDenied = errors.New("egress: " + Code)

// ErrAllowList reports an allow-list entry that is neither a host name,
// an IP address nor a CIDR prefix.
var ErrAllowList = errors.New("egress: malformed allow-list entry")

// DeniedError is a refused address: the host asked for, the address it
// came to and the range that refuses it.
type DeniedError struct {
	Host  string
	Addr  netip.Addr
	Range string
}

func (e *DeniedError) Error() string {
	if e.Host == "" || e.Host == e.Addr.String() {
		return fmt.Sprintf("%s: %s is a %s address, which the egress policy refuses", Code, e.Addr, e.Range)
	}
	return fmt.Sprintf("%s: %s resolves to %s, a %s address, which the egress policy refuses", Code, e.Host, e.Addr, e.Range)
}

// Is makes a DeniedError match ErrDenied.
func (e *DeniedError) Is(target error) bool { return target == ErrDenied }

// refusedRange is one range refused by default and what it is.
type refusedRange struct {
	prefix netip.Prefix
	name   string
}

// The ranges refused by default. IPv4-mapped addresses are unmapped
// first; IPv4-compatible, NAT64 and 6to4 addresses are judged by the IPv4
// address they carry (embeddedV4), so they are not listed.
var refused = func() []refusedRange {
	list := []struct{ cidr, name string }{
		{"0.0.0.0/8", "unspecified"},
		{"10.0.0.0/8", "private"},
		{"100.64.0.0/10", "shared"},
		{"127.0.0.0/8", "loopback"},
		{"169.254.0.0/16", "link-local"},
		{"172.16.0.0/12", "private"},
		{"192.0.0.0/24", "reserved"},
		{"192.168.0.0/16", "private"},
		{"198.18.0.0/15", "reserved"},
		{"224.0.0.0/4", "multicast"},
		{"240.0.0.0/4", "reserved"}, // and 255.255.255.255, the broadcast address
		{"::/128", "unspecified"},
		{"::1/128", "loopback"},
		{"64:ff9b:1::/48", "private"}, // local-use NAT64
		{"100::/64", "reserved"},      // discard-only
		{"fc00::/7", "private"},       // unique local
		{"fe80::/10", "link-local"},
		{"fec0::/10", "private"}, // site-local, deprecated
		{"ff00::/8", "multicast"},
	}
	out := make([]refusedRange, len(list))
	for i, r := range list {
		out[i] = refusedRange{netip.MustParsePrefix(r.cidr), r.name}
	}
	return out
}()

// Prefixes whose addresses carry an IPv4 address, and where it starts.
var (
	compatV4  = netip.MustParsePrefix("::/96")        // IPv4-compatible (deprecated): the last 4 bytes
	nat64     = netip.MustParsePrefix("64:ff9b::/96") // well-known NAT64: the last 4 bytes
	sixToFour = netip.MustParsePrefix("2002::/16")    // 6to4: bytes 2 to 5
)

// embeddedV4 is the IPv4 address a (non-mapped) IPv6 address a carries
// to the IPv4 internet, if it carries one.
func embeddedV4(a netip.Addr) (netip.Addr, bool) {
	b := a.As16()
	switch {
	case compatV4.Contains(a) && a != netip.IPv6Unspecified() && a != netip.IPv6Loopback():
		return netip.AddrFrom4([4]byte(b[12:16])), true
	case nat64.Contains(a):
		return netip.AddrFrom4([4]byte(b[12:16])), true
	case sixToFour.Contains(a):
		return netip.AddrFrom4([4]byte(b[2:6])), true
	}
	return netip.Addr{}, false
}

// RefusedRange names the default range addr is in ("loopback",
// "link-local", "private", "shared", "multicast", "unspecified",
// "reserved"), or "" when it is in none: the default policy, without an
// allow-list.
func RefusedRange(addr netip.Addr) string {
	a := addr.WithZone("").Unmap()
	if v4, ok := embeddedV4(a); ok {
		a = v4
	}
	if !a.IsValid() {
		return "invalid"
	}
	for _, r := range refused {
		if r.prefix.Contains(a) {
			return r.name
		}
	}
	return ""
}

// Policy is an egress policy: the default refused ranges, opened by an
// allow-list of host names and prefixes. A nil *Policy is the default
// policy, with no allow-list. A Policy is immutable and safe for
// concurrent use.
type Policy struct {
	hosts    []string // lower-case names; "*.suffix" opens the suffix's subdomains
	prefixes []netip.Prefix
}

// Default is the default policy: every refused range refused, nothing
// allowed beyond the open internet.
func Default() *Policy { return &Policy{} }

// Parse parses an allow-list: entries separated by commas (spaces around
// them ignored), each a host name ("hooks.internal", "*.corp.example"),
// an IP address ("10.0.0.7", "fd00::7") or a CIDR prefix
// ("10.20.0.0/16", "127.0.0.0/8"). An empty list is the default policy.
// An entry that is none of these is an error naming it (ErrAllowList).
func Parse(list string) (*Policy, error) {
	var entries []string
	for e := range strings.SplitSeq(list, ",") {
		if e = strings.TrimSpace(e); e != "" {
			entries = append(entries, e)
		}
	}
	return New(entries...)
}

// New is the policy allowing entries (see Parse).
func New(entries ...string) (*Policy, error) {
	p := &Policy{}
	for _, e := range entries {
		if err := p.add(e); err != nil {
			return nil, err
		}
	}
	return p, nil
}

// MustNew is New for entries known to be well formed (tests, constants);
// it panics on a malformed one.
func MustNew(entries ...string) *Policy {
	p, err := New(entries...)
	if err != nil {
		panic(err)
	}
	return p
}

func (p *Policy) add(e string) error {
	if strings.Contains(e, "/") {
		pfx, err := netip.ParsePrefix(e)
		if err != nil {
			return fmt.Errorf("%w: %q is not a CIDR prefix", ErrAllowList, e)
		}
		p.prefixes = append(p.prefixes, pfx.Masked())
		return nil
	}
	if a, err := netip.ParseAddr(e); err == nil {
		if a.Zone() != "" {
			return fmt.Errorf("%w: %q has a zone", ErrAllowList, e)
		}
		a = a.Unmap()
		p.prefixes = append(p.prefixes, netip.PrefixFrom(a, a.BitLen()))
		return nil
	}
	name := strings.ToLower(strings.TrimSuffix(e, "."))
	if !validHost(strings.TrimPrefix(name, "*.")) {
		return fmt.Errorf("%w: %q is not a host name, an IP address or a CIDR prefix", ErrAllowList, e)
	}
	p.hosts = append(p.hosts, name)
	return nil
}

// validHost reports whether name is a DNS name: dot-separated labels of
// letters, digits, hyphens and underscores, none empty, starting or
// ending with a hyphen, nor longer than 63 bytes, the last not all
// digits (which an IP address is).
func validHost(name string) bool {
	if name == "" || len(name) > 253 || strings.Trim(name[strings.LastIndexByte(name, '.')+1:], "0123456789") == "" {
		return false
	}
	for label := range strings.SplitSeq(name, ".") {
		if label == "" || len(label) > 63 || label[0] == '-' || label[len(label)-1] == '-' {
			return false
		}
		for _, c := range label {
			if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
				return false
			}
		}
	}
	return true
}

// With is a copy of p that also allows hosts (names or addresses, as
// Parse takes them); p is unchanged.
func (p *Policy) With(hosts ...string) (*Policy, error) {
	q := &Policy{}
	if p != nil {
		q.hosts = append(q.hosts, p.hosts...)
		q.prefixes = append(q.prefixes, p.prefixes...)
	}
	for _, h := range hosts {
		if err := q.add(h); err != nil {
			return nil, err
		}
	}
	return q, nil
}

// AllowsHost reports whether host (a name, as a URL carries it) is on
// the allow-list by name: its connections are made whatever it resolves
// to. An IP address is never allowed by name (Check judges it).
func (p *Policy) AllowsHost(host string) bool {
	if p == nil || len(p.hosts) == 0 {
		return false
	}
	if _, err := netip.ParseAddr(host); err == nil {
		return false
	}
	host = strings.ToLower(strings.TrimSuffix(host, "."))
	for _, h := range p.hosts {
		if suffix, ok := strings.CutPrefix(h, "*"); ok {
			if strings.HasSuffix(host, suffix) && len(host) > len(suffix) {
				return true
			}
		} else if host == h {
			return true
		}
	}
	return false
}

// allowsAddr reports whether a is in one of the allowed prefixes.
func (p *Policy) allowsAddr(a netip.Addr) bool {
	if p == nil {
		return false
	}
	for _, pfx := range p.prefixes {
		if pfx.Contains(a) {
			return true
		}
	}
	return false
}

// Check judges a connection to addr for host (the name asked for, or ""):
// nil when the address is in no refused range or the allow-list opens
// it, else a *DeniedError.
func (p *Policy) Check(host string, addr netip.Addr) error {
	a := addr.WithZone("").Unmap()
	if p.allowsAddr(a) {
		return nil
	}
	if r := RefusedRange(a); r != "" {
		return &DeniedError{Host: host, Addr: a, Range: r}
	}
	return nil
}
