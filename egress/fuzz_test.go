package egress

import (
	"net/netip"
	"testing"
)

// FuzzCheck: an operator's allow-list and any address. Parsing accepts or
// refuses with an error, never panics; an accepted policy lets an address
// through only when no default range holds it or the allow-list names it,
// and the IPv4-mapped form of an IPv4 address is judged as the address.
func FuzzCheck(f *testing.F) {
	f.Add("", []byte{127, 0, 0, 1})
	f.Add("10.0.0.0/8,*.example.com", []byte{10, 1, 2, 3})
	f.Add("::1/128", []byte{0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1})
	f.Add("localhost", []byte{0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 169, 254, 169, 254})
	f.Add("100.64.0.0/10", []byte{0x20, 0x02, 10, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0})
	f.Add("bad entry,", []byte{8, 8, 8, 8})
	f.Fuzz(func(t *testing.T, list string, raw []byte) {
		p, err := Parse(list)
		if err != nil {
			return
		}
		a, ok := netip.AddrFromSlice(raw)
		if !ok {
			return
		}
		err = p.Check("", a)
		if err == nil && RefusedRange(a) != "" && !p.allowsAddr(a.WithZone("").Unmap()) {
			t.Fatalf("%s (range %s) let through by %q", a, RefusedRange(a), list)
		}
		if err != nil {
			if d, ok := Denied(err); !ok || d.Range == "" {
				t.Fatalf("refusal of %s is not a DeniedError naming its range: %v", a, err)
			}
		}
		if a.Is4() {
			mapped := netip.AddrFrom16(a.As16())
			if (p.Check("", mapped) == nil) != (err == nil) {
				t.Fatalf("%s and its mapped form %s judged differently", a, mapped)
			}
		}
	})
}
