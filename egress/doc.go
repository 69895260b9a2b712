// Package egress is agentbus's policy for outbound connections whose
// address comes from a tenant or a remote party: webhook tools, and the
// OAuth discovery, registration and token requests to URLs a Skill
// Service names.
//
// A Policy refuses, by default, every address that reaches inside the
// deployment rather than the open internet: loopback, link-local (the
// cloud metadata endpoints 169.254.169.254 and fd00:ec2::254 among them),
// private, shared (100.64.0.0/10), multicast, unspecified and reserved
// ranges, for IPv4 and IPv6, with IPv4-mapped, IPv4-compatible, NAT64 and
// 6to4 addresses judged by the IPv4 address they carry. An operator's
// allow-list (Parse: host names, "*.suffix" wildcards, IP addresses and
// CIDR prefixes) opens what a deployment needs.
//
// The check is made at connection time on the address actually dialled
// (DialContext, Transport): a name is resolved by the dialer and every
// address it tries is checked before its socket connects, so neither a
// redirect nor a name that resolves differently the second time (DNS
// rebinding) reaches a refused address. CheckURL is the earlier, advisory
// check of a URL when it is written (a webhook tool's creation): it
// refuses a URL whose host resolves only to refused addresses.
//
// A refusal is a *DeniedError, which matches ErrDenied; its message
// starts with the code "egress_denied".
package egress
