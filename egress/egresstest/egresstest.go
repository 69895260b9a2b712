// Package egresstest is test support for the egress policy: HTTP servers
// on loopback that count the connections they accept, so that a test
// can show a refused address received none.
package egresstest

import (
	"crypto/x509"
	"net"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
)

// Server is an httptest server on 127.0.0.1 that counts the connections
// it accepts. It is closed when the test ends.
type Server struct {
	*httptest.Server
	accepted atomic.Int64
}

type countingListener struct {
	net.Listener
	n *atomic.Int64
}

func (l countingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err == nil {
		l.n.Add(1)
	}
	return c, err
}

func newServer(t testing.TB, h http.Handler, tls bool) *Server {
	t.Helper()
	s := &Server{Server: httptest.NewUnstartedServer(h)}
	s.Listener = countingListener{Listener: s.Listener, n: &s.accepted}
	if tls {
		s.StartTLS()
	} else {
		s.Start()
	}
	t.Cleanup(s.Close)
	return s
}

// NewServer starts a plain HTTP Server serving h.
func NewServer(t testing.TB, h http.Handler) *Server { return newServer(t, h, false) }

// NewTLSServer starts an HTTPS Server serving h, its certificate valid
// for 127.0.0.1, ::1 and example.com (Roots trusts it).
func NewTLSServer(t testing.TB, h http.Handler) *Server { return newServer(t, h, true) }

// Accepted is how many connections the server has accepted.
func (s *Server) Accepted() int64 { return s.accepted.Load() }

// Port is the server's port, for URLs that name it by another host.
func (s *Server) Port() string {
	_, port, _ := net.SplitHostPort(s.Listener.Addr().String())
	return port
}

// Roots is a pool trusting the server's certificate (a TLS server's).
func (s *Server) Roots() *x509.CertPool {
	pool := x509.NewCertPool()
	if c := s.Certificate(); c != nil {
		pool.AddCert(c)
	}
	return pool
}
