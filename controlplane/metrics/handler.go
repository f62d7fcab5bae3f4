package metrics

import (
	"bytes"
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"

	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Path is where the control plane serves the metrics, on its one port.
const Path = "/metrics"

// MinTokenBytes is the shortest bearer token --metrics-token-file may hold.
const MinTokenBytes = 16

// maxTokenFileBytes caps the token file: a token is a few dozen bytes.
const maxTokenFileBytes = 4 << 10

// Handler serves the registry in the Prometheus text format, or OpenMetrics when the
// scraper asks for it. With a token, a request must carry "Authorization: Bearer <token>"
// (compared in constant time) or gets 401; an empty token serves everyone, as the health
// service does. On a nil Metrics it answers 404.
func (m *Metrics) Handler(token []byte) http.Handler {
	if m == nil {
		return http.NotFoundHandler()
	}
	h := promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{EnableOpenMetrics: true, MaxRequestsInFlight: 4})
	if len(token) == 0 {
		return h
	}
	want := sha256.Sum256(token)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !bearerMatches(r.Header.Values("Authorization"), want) {
			w.Header().Set("WWW-Authenticate", `Bearer realm="rbook metrics"`)
			http.Error(w, "the metrics endpoint needs \"Authorization: Bearer <token>\" with the token of rbook serve's --metrics-token-file", http.StatusUnauthorized)
			return
		}
		h.ServeHTTP(w, r)
	})
}

// bearerMatches reports whether the one Authorization header is "Bearer <token>" with the
// token hashing to want. Both sides are hashed first, so the comparison takes the same
// time whatever the length or content of the token sent.
func bearerMatches(values []string, want [sha256.Size]byte) bool {
	if len(values) != 1 {
		return false
	}
	scheme, tok, ok := strings.Cut(values[0], " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return false
	}
	got := sha256.Sum256([]byte(tok))
	return subtle.ConstantTimeCompare(got[:], want[:]) == 1
}

// ReadTokenFile reads the bearer token of --metrics-token-file: the file's content without
// surrounding whitespace, at least MinTokenBytes of visible ASCII. Errors name the file and
// what to do, never the token.
func ReadTokenFile(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("--metrics-token-file %s: %w", path, err)
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxTokenFileBytes+1))
	if err != nil {
		return nil, fmt.Errorf("--metrics-token-file %s: %w", path, err)
	}
	if len(b) > maxTokenFileBytes {
		return nil, fmt.Errorf("--metrics-token-file %s: file is over %d bytes; it should hold one token", path, maxTokenFileBytes)
	}
	b = bytes.TrimSpace(b)
	if len(b) < MinTokenBytes {
		return nil, fmt.Errorf("--metrics-token-file %s: the token is %d bytes, need at least %d (e.g. head -c 32 /dev/urandom | base64 > %s)",
			path, len(b), MinTokenBytes, path)
	}
	for _, c := range b {
		if c <= ' ' || c > '~' {
			return nil, fmt.Errorf("--metrics-token-file %s: %w", path, errTokenChars)
		}
	}
	return b, nil
}

var errTokenChars = errors.New("the token must be one line of visible ASCII characters without spaces (what Prometheus sends as a bearer token)")
