//lint:file-ignore SA1019 v1alpha reflection is deprecated, and still what older grpcurl and buf curl clients ask for, so it is tested here.

package server_test

import (
	"context"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"

	"connectrpc.com/connect"
	"connectrpc.com/grpcreflect"
	"google.golang.org/grpc/codes"
	rpb "google.golang.org/grpc/reflection/grpc_reflection_v1alpha"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/descriptorpb"
)

// hasComment reports whether any location of f carries want in its leading comments.
func hasComment(f *descriptorpb.FileDescriptorProto, want string) bool {
	for _, l := range f.GetSourceCodeInfo().GetLocation() {
		if strings.Contains(l.GetLeadingComments(), strings.TrimSpace(strings.TrimPrefix(want, "//"))) {
			return true
		}
	}
	return false
}

func fileNames(files []*descriptorpb.FileDescriptorProto) []string {
	var out []string
	for _, f := range files {
		out = append(out, f.GetName())
	}
	return out
}

// Reflection (v1, as grpcurl and buf curl use it) serves the rbook.v1 files with the proto's
// comments, each with the imports this stream has not been sent yet; unknown files and
// symbols are NOT_FOUND answers on a stream that stays usable; extensions come from the
// linked registry.
func TestReflectionV1ServesFilesWithCommentsAndTheirImportsOnce(t *testing.T) {
	p := startServe(t)
	rs := grpcreflect.NewClient(h2cClient(), p.URL).NewStream(context.Background())
	defer rs.Close()

	names, err := rs.ListServices()
	if err != nil {
		t.Fatal(err)
	}
	got := make([]string, 0, len(names))
	for _, n := range names {
		got = append(got, string(n))
	}
	sort.Strings(got)
	if want := "grpc.health.v1.Health rbook.v1.ApprovalService rbook.v1.IdentityService rbook.v1.RunService"; strings.Join(got, " ") != want {
		t.Fatalf("ListServices = %v, want %s", got, want)
	}

	runFiles, err := rs.FileContainingSymbol("rbook.v1.RunService")
	if err != nil {
		t.Fatal(err)
	}
	root := runFiles[0]
	if root.GetName() != "rbook/v1/run_service.proto" || len(root.GetService()) == 0 || root.GetService()[0].GetName() != "RunService" {
		t.Fatalf("FileContainingSymbol(rbook.v1.RunService) starts with %s, services %v", root.GetName(), root.GetService())
	}
	if want := leadingComment(t, filepath.Join("..", "..", "proto", "rbook", "v1", "run_service.proto"), "RunService"); !hasComment(root, want) {
		t.Errorf("run_service.proto as served lacks the proto comment %q", want)
	}
	sent := fileNames(runFiles)
	for _, dep := range root.GetDependency() {
		if !slices.Contains(sent, dep) {
			t.Errorf("the answer lacks the import %s of run_service.proto: %v", dep, sent)
		}
	}

	appFiles, err := rs.FileContainingSymbol("rbook.v1.ApprovalService")
	if err != nil {
		t.Fatal(err)
	}
	if appFiles[0].GetName() != "rbook/v1/approval_service.proto" {
		t.Fatalf("FileContainingSymbol(rbook.v1.ApprovalService) starts with %s", appFiles[0].GetName())
	}
	for _, f := range appFiles[1:] {
		if slices.Contains(sent, f.GetName()) {
			t.Errorf("%s was sent twice on one stream", f.GetName())
		}
	}

	health, err := rs.FileContainingSymbol("grpc.health.v1.HealthCheckResponse")
	if err != nil || health[0].GetName() != "grpc/health/v1/health.proto" || health[0].GetPackage() != "grpc.health.v1" {
		t.Fatalf("FileContainingSymbol(grpc.health.v1.HealthCheckResponse) = %v, %v", fileNames(health), err)
	}
	byName, err := rs.FileByFilename("rbook/v1/run_service.proto")
	if err != nil || byName[0].GetName() != "rbook/v1/run_service.proto" {
		t.Fatalf("FileByFilename(rbook/v1/run_service.proto) = %v, %v (the root is sent again however often it is asked for)", fileNames(byName), err)
	}

	for what, call := range map[string]func() error{
		"FileByFilename(no/such.proto)":   func() error { _, err := rs.FileByFilename("no/such.proto"); return err },
		"FileContainingSymbol(no.Such)":   func() error { _, err := rs.FileContainingSymbol("no.Such"); return err },
		"AllExtensionNumbers(no.Such)":    func() error { _, err := rs.AllExtensionNumbers("no.Such"); return err },
		"FileContainingExtension(..., 1)": func() error { _, err := rs.FileContainingExtension("rbook.v1.Run", 1); return err },
	} {
		if err := call(); connect.CodeOf(err) != connect.CodeNotFound {
			t.Errorf("%s: %v, want a NOT_FOUND answer", what, err)
		}
	}

	// protodesc links go_features.proto, whose extension 1002 extends google.protobuf.FeatureSet.
	nums, err := rs.AllExtensionNumbers("google.protobuf.FeatureSet")
	if err != nil || !slices.Contains(nums, 1002) {
		t.Errorf("AllExtensionNumbers(google.protobuf.FeatureSet) = %v, %v, want 1002 among them", nums, err)
	}
	ext, err := rs.FileContainingExtension("google.protobuf.FeatureSet", 1002)
	if err != nil || ext[0].GetName() != "google/protobuf/go_features.proto" {
		t.Errorf("FileContainingExtension(google.protobuf.FeatureSet, 1002) = %v, %v", fileNames(ext), err)
	}
}

// The v1alpha service (older grpcurl and grpcui) has the same wire format and answers: it
// echoes the host and the original request; a request with nothing in it ends the stream with
// INVALID_ARGUMENT.
func TestReflectionV1AlphaAnswersAsV1(t *testing.T) {
	p := startServe(t)
	c := rpb.NewServerReflectionClient(grpcConn(t, p.Addr))
	stream, err := c.ServerReflectionInfo(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if err := stream.Send(&rpb.ServerReflectionRequest{Host: "cp.example", MessageRequest: &rpb.ServerReflectionRequest_ListServices{ListServices: "*"}}); err != nil {
		t.Fatal(err)
	}
	res, err := stream.Recv()
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, s := range res.GetListServicesResponse().GetService() {
		got = append(got, s.GetName())
	}
	sort.Strings(got)
	if res.GetValidHost() != "cp.example" || res.GetOriginalRequest().GetListServices() != "*" ||
		strings.Join(got, " ") != "grpc.health.v1.Health rbook.v1.ApprovalService rbook.v1.IdentityService rbook.v1.RunService" {
		t.Fatalf("list_services answer: host %q, original %v, services %v", res.GetValidHost(), res.GetOriginalRequest(), got)
	}

	if err := stream.Send(&rpb.ServerReflectionRequest{MessageRequest: &rpb.ServerReflectionRequest_FileContainingSymbol{FileContainingSymbol: "rbook.v1.ApprovalService"}}); err != nil {
		t.Fatal(err)
	}
	if res, err = stream.Recv(); err != nil {
		t.Fatal(err)
	}
	files := res.GetFileDescriptorResponse().GetFileDescriptorProto()
	var root descriptorpb.FileDescriptorProto
	if len(files) == 0 {
		t.Fatalf("file_containing_symbol answer has no files: %v", res)
	}
	if err := proto.Unmarshal(files[0], &root); err != nil || root.GetName() != "rbook/v1/approval_service.proto" {
		t.Fatalf("file_containing_symbol answer starts with %s (%v)", root.GetName(), err)
	}

	if err := stream.Send(&rpb.ServerReflectionRequest{Host: "cp.example"}); err != nil {
		t.Fatal(err)
	}
	if _, err := stream.Recv(); status.Code(err) != codes.InvalidArgument {
		t.Fatalf("an empty request: %v, want InvalidArgument", err)
	}
}
