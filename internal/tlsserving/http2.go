// Package tlsserving holds the TLS settings every HTTPS server of ours shares.
package tlsserving

import "crypto/tls"

// DisableHTTP2 makes a server offer HTTP/1.1 only (ALPN), as kubebuilder's scaffolding does for
// controller-runtime's webhook and metrics servers, which offer h2 by default
// (controller-runtime v0.22.4, pkg/webhook/server.go and pkg/metrics/server/server.go): HTTP/2's
// stream reset and cancellation floods (CVE-2023-44487 "Rapid Reset", CVE-2023-39325) cost a
// server work per stream that a client never waits for. Nothing we serve (admission reviews,
// metrics scrapes, probes) gains from HTTP/2. pool-scheduler's secure port gets the same from
// kube-scheduler's --disable-http2-serving, which the binary defaults to true.
func DisableHTTP2(c *tls.Config) { c.NextProtos = []string{"http/1.1"} }
