package server

import (
	_ "embed"
	"errors"
	"fmt"
	"strings"
	"sync"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protodesc"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"
	"google.golang.org/protobuf/types/descriptorpb"

	"github.com/rbookhq/rbook-action/gen/rbook/v1/rbookv1connect"
)

// rbookDescriptorSet is proto/ compiled by buf with its source info (the comments), as a
// google.protobuf.FileDescriptorSet that includes its imports. The generated Go code in
// gen/ carries descriptors without comments, so reflection serves this set instead and
// `grpcurl describe rbook.v1.RunService` shows the proto's documentation.
// Regenerate it whenever proto/ changes (.ci/gen-check fails when it is stale):
//
//	go tool -modfile=tools/go.mod buf build --as-file-descriptor-set -o controlplane/server/rbook.binpb
//
//go:embed rbook.binpb
var rbookDescriptorSet []byte

// reflectionFiles resolves the files and symbols reflection serves: the rbook.v1 files
// (and their imports) from rbookDescriptorSet plus grpc.health.v1 (healthFile), anything
// else from the linked Go registry.
type reflectionFiles struct{ withComments *protoregistry.Files }

// newReflectionFiles parses rbookDescriptorSet. It fails when the set does not parse or
// does not describe the services this binary serves (a stale set after a proto change that
// renamed one).
func newReflectionFiles(services ...string) (*reflectionFiles, error) {
	var set descriptorpb.FileDescriptorSet
	if err := proto.Unmarshal(rbookDescriptorSet, &set); err != nil {
		return nil, fmt.Errorf("reflection descriptors: %w", err)
	}
	health, err := healthFile()
	if err != nil {
		return nil, fmt.Errorf("reflection descriptors: %w", err)
	}
	set.File = append(set.File, health)
	files, err := protodesc.NewFiles(&set)
	if err != nil {
		return nil, fmt.Errorf("reflection descriptors: %w", err)
	}
	for _, s := range services {
		if _, err := files.FindDescriptorByName(protoreflect.FullName(s)); err != nil {
			return nil, fmt.Errorf("reflection descriptors lack %s (regenerate controlplane/server/rbook.binpb): %w", s, err)
		}
	}
	return &reflectionFiles{withComments: files}, nil
}

// reflectionResolver is newReflectionFiles for the services this server serves, parsed once.
var reflectionResolver = sync.OnceValues(func() (*reflectionFiles, error) {
	return newReflectionFiles(rbookv1connect.RunServiceName, rbookv1connect.ApprovalServiceName)
})

// FindFileByPath implements protodesc.Resolver.
func (r *reflectionFiles) FindFileByPath(path string) (protoreflect.FileDescriptor, error) {
	fd, err := r.withComments.FindFileByPath(path)
	if errors.Is(err, protoregistry.NotFound) {
		return protoregistry.GlobalFiles.FindFileByPath(path)
	}
	return fd, err
}

// FindDescriptorByName implements protodesc.Resolver.
func (r *reflectionFiles) FindDescriptorByName(name protoreflect.FullName) (protoreflect.Descriptor, error) {
	d, err := r.withComments.FindDescriptorByName(name)
	if errors.Is(err, protoregistry.NotFound) {
		return protoregistry.GlobalFiles.FindDescriptorByName(name)
	}
	return d, err
}

// connectHealthPath and connectHealthPackage are where connectrpc's grpchealth registers its
// copy of grpc/health/v1/health.proto: a package of its own, so that it cannot clash with
// grpc-go's registration of the same file.
const (
	connectHealthPath    = "connectext/grpc/health/v1/health.proto"
	connectHealthPackage = "connectext.grpc.health.v1"
)

// grpcServingStatus is grpc.health.v1.HealthCheckResponse.ServingStatus as gRPC defines it.
var grpcServingStatus = map[int32]string{0: "UNKNOWN", 1: "SERVING", 2: "NOT_SERVING", 3: "SERVICE_UNKNOWN"}

// healthFile is the grpc.health.v1 descriptor as gRPC clients know it, made from
// grpchealth's registered copy by undoing its renaming (what grpcreflect's own resolver
// serves; a custom resolver replaces that one, so it must serve it too).
func healthFile() (*descriptorpb.FileDescriptorProto, error) {
	fd, err := protoregistry.GlobalFiles.FindFileByPath(connectHealthPath)
	if err != nil {
		return nil, fmt.Errorf("grpc health descriptor %s: %w", connectHealthPath, err)
	}
	fdp := protodesc.ToFileDescriptorProto(fd)
	fdp.Name = proto.String("grpc/health/v1/health.proto")
	fdp.Package = proto.String("grpc.health.v1")
	fdp.Options = nil // go_package and friends name connect's copy
	rename := func(s *string) *string {
		if s == nil {
			return nil
		}
		return proto.String(strings.Replace(*s, "."+connectHealthPackage+".", ".grpc.health.v1.", 1))
	}
	var fixMessage func(m *descriptorpb.DescriptorProto) error
	fixMessage = func(m *descriptorpb.DescriptorProto) error {
		for _, f := range m.Field {
			f.TypeName = rename(f.TypeName)
		}
		for _, e := range m.EnumType {
			// connect's copy spells ServingStatus's values SERVING_STATUS_*; gRPC's are these.
			for _, v := range e.Value {
				name, ok := grpcServingStatus[v.GetNumber()]
				if !ok {
					return fmt.Errorf("grpc health descriptor: unknown %s value %d", e.GetName(), v.GetNumber())
				}
				v.Name = proto.String(name)
			}
		}
		for _, n := range m.NestedType {
			if err := fixMessage(n); err != nil {
				return err
			}
		}
		return nil
	}
	for _, m := range fdp.MessageType {
		if err := fixMessage(m); err != nil {
			return nil, err
		}
	}
	for _, svc := range fdp.Service {
		for _, m := range svc.Method {
			m.InputType, m.OutputType = rename(m.InputType), rename(m.OutputType)
		}
	}
	return fdp, nil
}
