package e2e

// End-to-end tests of tracing and structured logs (docs/tracing.md): `rbook run` and
// `rbook serve` export to a local OTLP/HTTP receiver, and the control plane's JSON log lines
// name the run, the approval and the trace.

import (
	"compress/gzip"
	"encoding/hex"
	"encoding/json"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	"google.golang.org/protobuf/proto"
)

// span is one span an OTLP receiver got, with its resource's service.name.
type span struct {
	service, name           string
	traceID, spanID, parent string
	attrs                   map[string]string
	errorStatus             bool
}

// otlpReceiver is an OTLP/HTTP traces receiver: it decodes each ExportTraceServiceRequest
// (protobuf, gzip or not) posted to /v1/traces and keeps its spans.
type otlpReceiver struct {
	URL   string
	mu    sync.Mutex
	spans []span
}

func newOTLPReceiver(t *testing.T) *otlpReceiver {
	t.Helper()
	r := &otlpReceiver{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if req.URL.Path != "/v1/traces" || req.Header.Get("Content-Type") != "application/x-protobuf" {
			http.Error(w, "want protobuf at /v1/traces", http.StatusBadRequest)
			return
		}
		var body io.Reader = req.Body
		if req.Header.Get("Content-Encoding") == "gzip" {
			gz, err := gzip.NewReader(req.Body)
			if err != nil {
				http.Error(w, err.Error(), http.StatusBadRequest)
				return
			}
			body = gz
		}
		data, err := io.ReadAll(body)
		var msg coltracepb.ExportTraceServiceRequest
		if err == nil {
			err = proto.Unmarshal(data, &msg)
		}
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		r.add(&msg)
		w.Header().Set("Content-Type", "application/x-protobuf")
		out, _ := proto.Marshal(&coltracepb.ExportTraceServiceResponse{})
		w.Write(out)
	}))
	t.Cleanup(srv.Close)
	r.URL = srv.URL
	return r
}

func (r *otlpReceiver) add(msg *coltracepb.ExportTraceServiceRequest) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, rs := range msg.GetResourceSpans() {
		service := attrMap(rs.GetResource().GetAttributes())["service.name"]
		for _, ss := range rs.GetScopeSpans() {
			for _, s := range ss.GetSpans() {
				r.spans = append(r.spans, span{
					service: service, name: s.GetName(),
					traceID: hex.EncodeToString(s.GetTraceId()), spanID: hex.EncodeToString(s.GetSpanId()), parent: hex.EncodeToString(s.GetParentSpanId()),
					attrs: attrMap(s.GetAttributes()), errorStatus: s.GetStatus().GetCode() == 2, // STATUS_CODE_ERROR
				})
			}
		}
	}
}

// attrMap is OTLP attributes as strings (ints and bools in their decimal and Go spelling).
func attrMap(kvs []*commonpb.KeyValue) map[string]string {
	m := map[string]string{}
	for _, kv := range kvs {
		v := kv.GetValue()
		switch v.GetValue().(type) {
		case *commonpb.AnyValue_IntValue:
			m[kv.GetKey()] = strconv.FormatInt(v.GetIntValue(), 10)
		case *commonpb.AnyValue_BoolValue:
			m[kv.GetKey()] = strconv.FormatBool(v.GetBoolValue())
		default:
			m[kv.GetKey()] = v.GetStringValue()
		}
	}
	return m
}

// of returns the spans service sent.
func (r *otlpReceiver) of(service string) []span {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []span
	for _, s := range r.spans {
		if s.service == service {
			out = append(out, s)
		}
	}
	return out
}

// stopServeGracefully sends SIGTERM to the control plane and waits until it exited (its
// spans flushed on the way out).
func stopServeGracefully(t *testing.T, s *cpServer) {
	t.Helper()
	s.mu.Lock()
	cmd, exited := s.cmd, s.exited
	s.mu.Unlock()
	cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-exited:
	case <-time.After(30 * time.Second):
		t.Fatal("rbook serve did not exit within 30s of SIGTERM")
	}
}

// demoSteps are the demo's steps, each recorded once in a run approved at its gate, with
// their statuses (demoPass).
var demoSteps = map[string]string{
	"web-apps-enforce-https": "PASS", "resources-have-owner-tag": "FAIL", "deploy-app-config": "PASS",
	"rollback-app-config": "SKIPPED", "confirm-rollout": "PASS", "app-running-after-rollout": "PASS",
}

// A run reported to `rbook serve`, both exporting to one OTLP receiver, is one trace: the
// executor's root span with the run id, exactly one span per step with its status, the gate's
// span with its approval and verdict, and the control plane's span of every RPC the run made
// in the same trace.
func TestServedRunIsOneTraceAcrossExecutorAndControlPlane(t *testing.T) {
	skipShort(t)
	dir := workdir(t)
	recv := newOTLPReceiver(t)
	cp := startServe(t, dir, "--otlp-endpoint", recv.URL) // the flag alone: no OTEL_* variable yet
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", recv.URL)
	runID := approvedServedRun(t, dir, cp.url())
	stopServeGracefully(t, cp)

	root, gate := checkRunTrace(t, recv.of("rbook"), runID, "control-plane")

	// Every call the executor made is in its trace; rbook approve's is a trace of its own.
	served := recv.of("rbook-control-plane")
	procs := map[string]span{}
	for _, s := range served {
		procs[s.name] = s
		if inRun := s.traceID == root.traceID; inRun == (s.name == "rbook.v1.ApprovalService/Approve") {
			t.Errorf("control plane span %q is in trace %s, the run's is %s", s.name, s.traceID, root.traceID)
		}
	}
	for _, p := range []string{"rbook.v1.RunService/StartRun", "rbook.v1.RunService/RecordTransitions", "rbook.v1.ApprovalService/RequestApproval"} {
		if s, ok := procs[p]; !ok || s.attrs["rbook.run_id"] != runID {
			t.Errorf("control plane span %s: %+v (run %s); got %v", p, s, runID, slices.Sorted(maps.Keys(procs)))
		}
	}
	if ra := procs["rbook.v1.ApprovalService/RequestApproval"]; ra.attrs["rbook.approval_id"] != gate.attrs["rbook.approval_id"] || ra.parent != gate.spanID {
		t.Errorf("RequestApproval span %+v: want approval %s under the gate's span %s", ra, gate.attrs["rbook.approval_id"], gate.spanID)
	}
}

// checkRunTrace checks the executor's spans of the demo run runID, approved at its gate by
// one of channels: one root span, exactly one span per step under it with its status, the
// gate's span with the approval, every span in the root's trace. It returns the root and the
// gate's span.
func checkRunTrace(t *testing.T, exec []span, runID string, channels ...string) (root, gate span) {
	t.Helper()
	for _, s := range exec {
		if s.name == "rbook run demo" {
			if root.name != "" {
				t.Fatalf("two root spans: %+v and %+v", root, s)
			}
			root = s
		}
	}
	if root.name == "" || root.attrs["rbook.run_id"] != runID || root.attrs["rbook.runbook"] != "demo" || root.attrs["rbook.run_status"] != "COMPLETED" || root.parent != "" {
		t.Fatalf("root span %+v (run %s); the executor sent %+v", root, runID, exec)
	}
	steps := map[string]int{}
	for _, s := range exec {
		if s.traceID != root.traceID {
			t.Errorf("span %q is in trace %s, the run's is %s", s.name, s.traceID, root.traceID)
		}
		switch {
		case strings.HasPrefix(s.name, "step "):
			name := strings.TrimPrefix(s.name, "step ")
			steps[name]++
			if s.parent != root.spanID || s.attrs["rbook.run_id"] != runID || s.attrs["rbook.step.status"] != demoSteps[name] || s.attrs["rbook.step.kind"] == "" {
				t.Errorf("step span %+v: want parent %s, run id %s, status %s", s, root.spanID, runID, demoSteps[name])
			}
			if s.errorStatus != (demoSteps[name] == "FAIL") {
				t.Errorf("step span %q: error status %v with step status %s", s.name, s.errorStatus, demoSteps[name])
			}
		case strings.HasPrefix(s.name, "gate "):
			gate = s
		}
	}
	want := map[string]int{}
	for name := range demoSteps {
		want[name] = 1
	}
	if !maps.Equal(steps, want) {
		t.Errorf("step spans %v, want one per step %v", steps, want)
	}
	if gate.name != "gate confirm-rollout" || gate.attrs["rbook.gate.verdict"] != "approved" || !slices.Contains(channels, gate.attrs["rbook.gate.channel"]) ||
		!strings.HasPrefix(gate.attrs["rbook.approval_id"], "a-") || gate.attrs["rbook.run_id"] != runID {
		t.Errorf("gate span %+v", gate)
	}

	return root, gate
}

// A run on a laptop, with the control plane rbook run starts in its own process, is one trace
// too: the embedded control plane's spans of the run's calls are in it.
func TestLaptopRunWithItsEmbeddedControlPlaneIsOneTrace(t *testing.T) {
	skipShort(t)
	dir := workdir(t)
	recv := newOTLPReceiver(t)
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", recv.URL)
	out, code := run(t, dir, "yes\n", "run", "demo")
	if code != 0 {
		t.Fatalf("exit %d\n%s", code, out)
	}
	runID := readState(t, dir).RunID
	// The terminal's answer is recorded on the control plane: whichever of the two tells the
	// gate first is the channel.
	spans := recv.of("rbook")
	root, _ := checkRunTrace(t, spans, runID, "terminal", "control-plane")
	var recorded bool
	for _, s := range spans {
		if s.name == "rbook.v1.RunService/RecordTransitions" && s.attrs["rbook.run_id"] == runID && s.traceID == root.traceID {
			recorded = true
		}
	}
	if !recorded {
		t.Errorf("no RecordTransitions span of run %s in its trace; spans: %+v", runID, spans)
	}
}

// With `rbook serve --log-json`, the log lines about a served run carry its run id and trace
// id, and those about its gate the approval id and the step.
func TestServedRunLogLinesNameRunApprovalAndTrace(t *testing.T) {
	skipShort(t)
	dir := workdir(t)
	recv := newOTLPReceiver(t)
	cp := startServe(t, dir, "--log-json")
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", recv.URL)
	runID := approvedServedRun(t, dir, cp.url())
	stopServeGracefully(t, cp)
	var traceID string
	for _, s := range recv.of("rbook") {
		if s.name == "rbook run demo" {
			traceID = s.traceID
		}
	}
	if traceID == "" {
		t.Fatalf("the executor exported no root span: %+v", recv.of("rbook"))
	}

	seen := map[string]map[string]any{}
	for _, line := range serveLog(t, cp) {
		key, _ := line["msg"].(string)
		if p, _ := line["procedure"].(string); p != "" {
			key += " " + p
		}
		if _, ok := seen[key]; !ok {
			seen[key] = line
		}
	}
	for _, c := range []struct {
		key  string
		want map[string]string
	}{
		{"rpc /rbook.v1.RunService/StartRun", map[string]string{"run_id": runID, "trace_id": traceID}},
		{"rpc /rbook.v1.RunService/RecordTransitions", map[string]string{"run_id": runID, "trace_id": traceID}},
		{"rpc /rbook.v1.ApprovalService/RequestApproval", map[string]string{"run_id": runID, "step": "confirm-rollout", "trace_id": traceID}},
		{"gate opened", map[string]string{"run_id": runID, "step": "confirm-rollout", "trace_id": traceID}},
	} {
		line, ok := seen[c.key]
		if !ok {
			t.Errorf("no %q log line; lines: %v", c.key, slices.Sorted(maps.Keys(seen)))
			continue
		}
		for k, v := range c.want {
			if line[k] != v {
				t.Errorf("%q log line: %s = %v, want %s\n%v", c.key, k, line[k], v, line)
			}
		}
	}
	// The handler makes the approval id (RequestApproval) or reads it from the token
	// (Approve): the calls' lines name it all the same.
	id, _ := seen["gate opened"]["approval_id"].(string)
	for _, key := range []string{"rpc /rbook.v1.ApprovalService/RequestApproval", "rpc /rbook.v1.ApprovalService/Approve", "gate decided"} {
		if !strings.HasPrefix(id, "a-") || seen[key]["approval_id"] != id || seen[key]["run_id"] != runID {
			t.Errorf("%q log line: approval_id %v, run_id %v; want %q, %s", key, seen[key]["approval_id"], seen[key]["run_id"], id, runID)
		}
	}
}

// approvedServedRun runs the demo against the control plane at url, approves its gate with
// rbook approve (over RPC: the deciding channel is the control plane) and returns the run id
// once the run completed.
func approvedServedRun(t *testing.T, dir, url string) string {
	t.Helper()
	t.Setenv("RBOOK_SHOW_TOKEN", "1")
	p := start(t, dir, "run", "demo", "--control-plane", url)
	if out, code := run(t, dir, "", "approve", tokenFrom(t, p), "--control-plane", url); code != 0 {
		t.Fatalf("rbook approve: exit %d\n%s", code, out)
	}
	if code := p.wait(t); code != 0 {
		t.Fatalf("run exit %d\n%s", code, p.output())
	}
	return readState(t, dir).RunID
}

// serveLog is every line s's instances printed that is a JSON object, decoded.
func serveLog(t *testing.T, s *cpServer) []map[string]any {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []map[string]any
	for _, l := range s.log {
		if !strings.HasPrefix(l, "{") {
			continue
		}
		var line map[string]any
		if err := json.Unmarshal([]byte(l), &line); err != nil {
			t.Fatalf("a log line is not JSON: %v\n%s", err, l)
		}
		out = append(out, line)
	}
	return out
}
