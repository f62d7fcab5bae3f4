package server_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// leadingComment returns the first line of the comment right above `service NAME {` in a
// proto file, so the test follows the proto's wording as it changes.
func leadingComment(t *testing.T, protoFile, service string) string {
	t.Helper()
	src, err := os.ReadFile(protoFile)
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`((?:\n//[^\n]*)+)\nservice ` + service + ` \{`).FindSubmatch(src)
	if m == nil {
		t.Fatalf("no comment above service %s in %s", service, protoFile)
	}
	return strings.Split(strings.TrimPrefix(string(m[1]), "\n"), "\n")[0]
}

// TestGrpcurlDescribeShowsProtoComments: reflection serves descriptors with
// source info, so the pinned grpcurl's `describe` against a real `rbook serve` prints the
// proto's comments; grpc.health.v1 stays describable under gRPC's own names.
func TestGrpcurlDescribeShowsProtoComments(t *testing.T) {
	bin := findGrpcurl(t)
	p := startServe(t)
	describe := func(symbol string) string {
		t.Helper()
		out, err := exec.Command(bin, "-plaintext", p.Addr, "describe", symbol).CombinedOutput()
		if err != nil {
			t.Fatalf("grpcurl describe %s: %v\n%s", symbol, err, out)
		}
		return string(out)
	}
	for _, tc := range []struct{ file, service string }{
		{"run_service.proto", "RunService"},
		{"approval_service.proto", "ApprovalService"},
	} {
		want := leadingComment(t, filepath.Join("..", "..", "proto", "rbook", "v1", tc.file), tc.service)
		if got := describe("rbook.v1." + tc.service); !strings.Contains(got, want+"\n") || !strings.Contains(got, "service "+tc.service+" {") {
			t.Errorf("describe rbook.v1.%s lacks the proto comment %q:\n%s", tc.service, want, got)
		}
	}
	if got := describe("grpc.health.v1.HealthCheckResponse"); !strings.Contains(got, "SERVING = 1;") {
		t.Errorf("describe grpc.health.v1.HealthCheckResponse:\n%s", got)
	}
	out, err := exec.Command(bin, "-plaintext", p.Addr, "grpc.health.v1.Health/Check").CombinedOutput()
	if err != nil || !strings.Contains(string(out), `"status": "SERVING"`) {
		t.Errorf("grpc.health.v1.Health/Check: %v\n%s", err, out)
	}
}
