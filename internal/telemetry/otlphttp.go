package telemetry

import (
	"bytes"
	"compress/gzip"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path"
	"strconv"
	"strings"
	"sync"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
)

// The OTLP exporter's defaults (the OpenTelemetry specification's "OTLP Exporter
// Configuration"): a 10 s timeout per export, and retries of a refused or failed export
// with exponential back-off from 1 s to at most 30 s apart, for at most a minute.
const (
	defaultExportTimeout = 10 * time.Second
	retryInitial         = time.Second
	retryMax             = 30 * time.Second
	retryMaxElapsed      = time.Minute
	maxResponseBody      = 64 << 10
)

// exporterConfig is what the OTLP/HTTP exporter is told by Options and the standard
// OTEL_EXPORTER_OTLP_* variables (docs/tracing.md, "Turning export on").
type exporterConfig struct {
	url      string
	headers  http.Header
	timeout  time.Duration
	gzip     bool
	tls      *tls.Config // nil: Go's defaults
	envError error       // a variable that could not be used; export still runs without it
}

// otlpEnv reads variable name in its _TRACES_ form first, then the generic one.
func otlpEnv(get func(string) string, name string) string {
	if v := strings.TrimSpace(get("OTEL_EXPORTER_OTLP_TRACES_" + name)); v != "" {
		return v
	}
	return strings.TrimSpace(get("OTEL_EXPORTER_OTLP_" + name))
}

// exporterConfigOf resolves the exporter's settings: the endpoint from o.Endpoint (already
// checked by Start), else OTEL_EXPORTER_OTLP_TRACES_ENDPOINT as given, else
// OTEL_EXPORTER_OTLP_ENDPOINT with /v1/traces joined to its path; the headers, timeout (ms),
// compression ("gzip" or "none") and the TLS files of the variables. Errors: no usable
// endpoint. A header, timeout or file it cannot use is left out and reported in envError.
func exporterConfigOf(o Options, endpoint string) (exporterConfig, error) {
	get := o.getenv()
	c := exporterConfig{url: endpoint, headers: http.Header{}, timeout: defaultExportTimeout}
	if c.url == "" {
		if v := strings.TrimSpace(get(envTracesEndpoint)); v != "" {
			c.url = v
		} else if v := strings.TrimSpace(get(envEndpoint)); v != "" {
			u, err := url.Parse(v)
			if err != nil {
				return c, fmt.Errorf("%s=%s is not a URL", envEndpoint, v)
			}
			u.Path = path.Join(u.Path, "/v1/traces")
			c.url = u.String()
		}
	}
	if u, err := url.Parse(c.url); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return c, fmt.Errorf("traces endpoint %q: want an http:// or https:// URL such as http://collector:4318/v1/traces", c.url)
	}
	var problems []error
	for _, name := range []string{"HEADERS", "TRACES_HEADERS"} {
		for _, pair := range strings.Split(strings.TrimSpace(get("OTEL_EXPORTER_OTLP_"+name)), ",") {
			if strings.TrimSpace(pair) == "" {
				continue
			}
			k, v, ok := strings.Cut(pair, "=")
			k = strings.TrimSpace(k)
			val, err := url.PathUnescape(v)
			if !ok || k == "" || err != nil {
				// The pair may hold a secret: name the variable only.
				problems = append(problems, fmt.Errorf("OTEL_EXPORTER_OTLP_%s: a pair is not key=url-encoded-value; it is left out", name))
				continue
			}
			c.headers.Set(k, strings.TrimSpace(val))
		}
	}
	if v := otlpEnv(get, "TIMEOUT"); v != "" {
		if ms, err := strconv.Atoi(v); err == nil && ms > 0 {
			c.timeout = time.Duration(ms) * time.Millisecond
		} else {
			problems = append(problems, fmt.Errorf("OTEL_EXPORTER_OTLP_TIMEOUT %q: want milliseconds, e.g. 10000; using 10 s", v))
		}
	}
	switch v := strings.ToLower(otlpEnv(get, "COMPRESSION")); v {
	case "gzip":
		c.gzip = true
	case "", "none":
	default:
		problems = append(problems, fmt.Errorf("OTEL_EXPORTER_OTLP_COMPRESSION %q: want gzip or none; sending uncompressed", v))
	}
	if t, err := tlsFromEnv(get); err != nil {
		problems = append(problems, err)
	} else {
		c.tls = t
	}
	c.envError = errors.Join(problems...)
	return c, nil
}

// tlsFromEnv is the client TLS of OTEL_EXPORTER_OTLP_CERTIFICATE (the CA bundle to trust)
// and OTEL_EXPORTER_OTLP_CLIENT_CERTIFICATE / _CLIENT_KEY (PEM files), nil when none is set.
func tlsFromEnv(get func(string) string) (*tls.Config, error) {
	ca, cert, key := otlpEnv(get, "CERTIFICATE"), otlpEnv(get, "CLIENT_CERTIFICATE"), otlpEnv(get, "CLIENT_KEY")
	if ca == "" && cert == "" && key == "" {
		return nil, nil
	}
	t := &tls.Config{MinVersion: tls.VersionTLS12}
	if ca != "" {
		pem, err := os.ReadFile(ca)
		if err != nil {
			return nil, fmt.Errorf("OTEL_EXPORTER_OTLP_CERTIFICATE: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("OTEL_EXPORTER_OTLP_CERTIFICATE %s: no PEM certificate in it", ca)
		}
		t.RootCAs = pool
	}
	if cert != "" || key != "" {
		pair, err := tls.LoadX509KeyPair(cert, key)
		if err != nil {
			return nil, fmt.Errorf("OTEL_EXPORTER_OTLP_CLIENT_CERTIFICATE and _CLIENT_KEY: %w", err)
		}
		t.Certificates = []tls.Certificate{pair}
	}
	return t, nil
}

// otlpExporter is an sdktrace.SpanExporter that posts each batch as one OTLP/HTTP protobuf
// request (the OpenTelemetry protocol specification, "OTLP/HTTP"): Content-Type
// application/x-protobuf, optionally gzip, retried on 429, 502, 503 and 504 (honouring
// Retry-After) and on transport errors.
type otlpExporter struct {
	cfg    exporterConfig
	client *http.Client
	mu     sync.Mutex
	closed bool
}

// newOTLPExporter is the exporter of cfg.
func newOTLPExporter(cfg exporterConfig) *otlpExporter {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	if cfg.tls != nil {
		tr.TLSClientConfig = cfg.tls
	}
	return &otlpExporter{cfg: cfg, client: &http.Client{Transport: tr}}
}

// ExportSpans sends spans in one request, retrying as described on otlpExporter within the
// export timeout and ctx. Errors: the last failure, naming the endpoint and the status.
func (e *otlpExporter) ExportSpans(ctx context.Context, spans []sdktrace.ReadOnlySpan) error {
	e.mu.Lock()
	closed := e.closed
	e.mu.Unlock()
	if closed || len(spans) == 0 {
		return nil
	}
	body := encodeTraces(spans)
	if e.cfg.gzip {
		var b bytes.Buffer
		zw := gzip.NewWriter(&b)
		_, _ = zw.Write(body)
		if err := zw.Close(); err != nil {
			return err
		}
		body = b.Bytes()
	}
	deadline := time.Now().Add(retryMaxElapsed)
	wait := retryInitial
	for {
		retry, after, err := e.post(ctx, body)
		if err == nil || !retry {
			return err
		}
		if after > 0 {
			wait = after
		}
		if time.Now().Add(wait).After(deadline) {
			return err
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return errors.Join(err, ctx.Err())
		case <-t.C:
		}
		wait = min(wait*2, retryMax)
	}
}

// post sends one request; retry says whether a failure may succeed when sent again, after
// how long the server asked to wait (Retry-After seconds, else 0).
func (e *otlpExporter) post(ctx context.Context, body []byte) (retry bool, after time.Duration, err error) {
	ctx, cancel := context.WithTimeout(ctx, e.cfg.timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, e.cfg.url, bytes.NewReader(body))
	if err != nil {
		return false, 0, err
	}
	for k, v := range e.cfg.headers {
		req.Header[k] = v
	}
	req.Header.Set("Content-Type", "application/x-protobuf")
	req.Header.Set("User-Agent", "rbook OTLP/HTTP exporter")
	if e.cfg.gzip {
		req.Header.Set("Content-Encoding", "gzip")
	}
	resp, err := e.client.Do(req)
	if err != nil {
		return ctx.Err() == nil || errors.Is(ctx.Err(), context.DeadlineExceeded), 0, fmt.Errorf("traces to %s: %w", e.cfg.url, err)
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, maxResponseBody))
	if resp.StatusCode/100 == 2 {
		return false, 0, nil
	}
	err = fmt.Errorf("traces to %s: the receiver answered %s", e.cfg.url, resp.Status)
	switch resp.StatusCode {
	case http.StatusTooManyRequests, http.StatusBadGateway, http.StatusServiceUnavailable, http.StatusGatewayTimeout:
		if s, perr := strconv.Atoi(resp.Header.Get("Retry-After")); perr == nil && s > 0 {
			after = time.Duration(s) * time.Second
		}
		return true, after, err
	}
	return false, 0, err
}

// Shutdown stops the exporter: later exports do nothing. Idle connections are closed.
func (e *otlpExporter) Shutdown(context.Context) error {
	e.mu.Lock()
	e.closed = true
	e.mu.Unlock()
	e.client.CloseIdleConnections()
	return nil
}
