package util

import (
	"crypto/tls"
	"net"
	"testing"
	"time"
)

// NegotiatedProtocol dials addr (host:port) over TLS offering h2 and http/1.1, as an HTTP/2
// client would, and returns the protocol the server chose by ALPN ("" if it chose none). The
// certificate is not verified: only the server's protocol choice is looked at.
func NegotiatedProtocol(t testing.TB, addr string) string {
	t.Helper()
	conn, err := tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", addr,
		&tls.Config{InsecureSkipVerify: true, NextProtos: []string{"h2", "http/1.1"}}) //nolint:gosec // only ALPN is checked
	if err != nil {
		t.Fatalf("TLS dial %s: %v", addr, err)
	}
	defer conn.Close()
	return conn.ConnectionState().NegotiatedProtocol
}

// RequireNoHTTP2 fails the test if the server at addr agrees to HTTP/2 (internal/tlsserving).
func RequireNoHTTP2(t testing.TB, addr string) {
	t.Helper()
	if p := NegotiatedProtocol(t, addr); p == "h2" {
		t.Errorf("%s negotiated HTTP/2 (ALPN %q); every server of ours offers HTTP/1.1 only", addr, p)
	}
}
