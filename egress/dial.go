package egress

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"syscall"
	"time"
)

// The dialer's bounds, those of net/http's default transport.
const (
	dialTimeout   = 30 * time.Second
	dialKeepAlive = 30 * time.Second
)

// ResolveTimeout bounds CheckURL's resolution of a name.
const ResolveTimeout = 3 * time.Second

// DialContext dials address (host:port) on network as the policy allows:
// a host allowed by name is dialled as is; any other is resolved by the
// dialer, and each address it is about to connect to is checked (Check)
// before its socket connects, so a refused address receives no
// connection at all. A refusal is a *DeniedError (wrapped in a
// *net.OpError).
func (p *Policy) DialContext(ctx context.Context, network, address string) (net.Conn, error) {
	host, _, err := net.SplitHostPort(address)
	if err != nil {
		return nil, fmt.Errorf("egress: %w", err)
	}
	d := &net.Dialer{Timeout: dialTimeout, KeepAlive: dialKeepAlive}
	if !p.AllowsHost(host) {
		d.Control = func(network, address string, _ syscall.RawConn) error {
			return p.checkDialled(host, network, address)
		}
	}
	return d.DialContext(ctx, network, address)
}

// checkDialled checks the address:port the dialer is about to connect
// to, for host. Only IP networks are dialled.
func (p *Policy) checkDialled(host, network, address string) error {
	switch network {
	case "tcp", "tcp4", "tcp6", "udp", "udp4", "udp6":
	default:
		return fmt.Errorf("%w: network %s", ErrDenied, network)
	}
	ap, err := netip.ParseAddrPort(address)
	if err != nil {
		return fmt.Errorf("%w: address %q", ErrDenied, address)
	}
	return p.Check(host, ap.Addr())
}

// Transport is a clone of base (net/http's default transport when nil)
// whose connections are dialled through the policy (DialContext). It uses
// no proxy, whose address would be checked in place of the destination's,
// and no custom TLS dialer, which would bypass the check.
func (p *Policy) Transport(base *http.Transport) *http.Transport {
	if base == nil {
		base = http.DefaultTransport.(*http.Transport)
	}
	tr := base.Clone()
	tr.Proxy = nil
	tr.DialTLSContext = nil
	//lint:ignore SA1019 cleared, so that it cannot bypass DialContext
	tr.DialTLS = nil
	tr.DialContext = p.DialContext
	return tr
}

// CheckURL is the check of a URL when it is written, before any
// connection: nil when its host is allowed by name, or is an address the
// policy allows, or is a name that resolves (within ResolveTimeout) to at
// least one allowed address or does not resolve now; a *DeniedError when
// every address it resolves to is refused. It is advisory: the name may
// resolve elsewhere later, which the connection's own check (DialContext)
// judges. A URL that does not parse or has no host is an error of its
// own.
func (p *Policy) CheckURL(ctx context.Context, raw string) error {
	u, err := url.Parse(raw)
	if err != nil || u.Hostname() == "" {
		return fmt.Errorf("egress: %q is not a URL with a host", raw)
	}
	host := u.Hostname()
	if p.AllowsHost(host) {
		return nil
	}
	if a, err := netip.ParseAddr(host); err == nil {
		return p.Check(host, a)
	}
	ctx, cancel := context.WithTimeout(ctx, ResolveTimeout)
	defer cancel()
	addrs, err := net.DefaultResolver.LookupNetIP(ctx, "ip", host)
	if err != nil || len(addrs) == 0 {
		return nil // unknown now: the connection is checked when it is made
	}
	var first error
	for _, a := range addrs {
		err := p.Check(host, a)
		if err == nil {
			return nil
		}
		if first == nil {
			first = err
		}
	}
	return first
}

// Denied returns the refusal err carries, if it carries one.
func Denied(err error) (*DeniedError, bool) {
	var d *DeniedError
	ok := errors.As(err, &d)
	return d, ok
}
