package server

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protodesc"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"
)

// The gRPC server reflection API (grpc/reflection/v1/reflection.proto; v1alpha has the same
// wire format), which grpcurl, grpcui and buf curl use to describe and call the services. It
// is written here against the wire format instead of linking connectrpc.com/grpcreflect: that
// package parses its embedded descriptors in its package initialiser, which every process
// linking it runs — every rbook command, `rbook --help` included (README, "Development",
// start-up time). It answers as grpcreflect v1.3.1 does.
const (
	reflectionV1Path      = "/grpc.reflection.v1.ServerReflection/"
	reflectionV1AlphaPath = "/grpc.reflection.v1alpha.ServerReflection/"
	reflectionMethod      = "ServerReflectionInfo"
)

// Field numbers of reflection.proto.
const (
	reqHost                      = 1 // ServerReflectionRequest.host
	reqFileByFilename            = 3
	reqFileContainingSymbol      = 4
	reqFileContainingExtension   = 5 // ExtensionRequest{containing_type = 1, extension_number = 2}
	reqAllExtensionNumbersOfType = 6
	reqListServices              = 7

	resValidHost                   = 1 // ServerReflectionResponse.valid_host
	resOriginalRequest             = 2
	resFileDescriptorResponse      = 4 // FileDescriptorResponse{repeated bytes file_descriptor_proto = 1}
	resAllExtensionNumbersResponse = 5 // ExtensionNumberResponse{base_type_name = 1, repeated int32 extension_number = 2}
	resListServicesResponse        = 6 // ListServiceResponse{repeated ServiceResponse service = 1}, ServiceResponse{name = 1}
	resErrorResponse               = 7 // ErrorResponse{error_code = 1, error_message = 2}
)

// reflectionHandlers returns the v1 and v1alpha reflection handlers with their paths: they
// list services and resolve files, symbols and extensions through files (extensions through
// the linked Go registry).
func reflectionHandlers(services []string, files protodesc.Resolver) map[string]http.Handler {
	r := &reflector{services: services, files: files, extensions: protoregistry.GlobalTypes}
	out := map[string]http.Handler{}
	for _, path := range []string{reflectionV1Path, reflectionV1AlphaPath} {
		out[path] = connect.NewBidiStreamHandler(path+reflectionMethod, r.serve,
			connect.WithCodec(wireCodec{}), connect.WithCodec(binaryOnlyJSONCodec{}))
	}
	return out
}

// reflector answers one reflection stream at a time; it holds no per-stream state.
type reflector struct {
	services   []string
	files      protodesc.Resolver
	extensions *protoregistry.Types
}

// wireMessage is a message as its protobuf encoding: the reflection handler decodes and
// encodes reflection.proto's few fields itself.
type wireMessage struct{ b []byte }

// wireCodec passes wireMessage bytes through as the "proto" codec.
type wireCodec struct{}

func (wireCodec) Name() string { return "proto" }

func (wireCodec) Marshal(v any) ([]byte, error) {
	m, ok := v.(*wireMessage)
	if !ok {
		return nil, fmt.Errorf("reflection codec: cannot marshal %T", v)
	}
	return m.b, nil
}

func (wireCodec) Unmarshal(b []byte, v any) error {
	m, ok := v.(*wireMessage)
	if !ok {
		return fmt.Errorf("reflection codec: cannot unmarshal into %T", v)
	}
	m.b = slices.Clone(b)
	return nil
}

// binaryOnlyJSONCodec refuses the JSON encoding, which reflection clients do not use.
type binaryOnlyJSONCodec struct{}

func (binaryOnlyJSONCodec) Name() string { return "json" }

func (binaryOnlyJSONCodec) Marshal(any) ([]byte, error) {
	return nil, errors.New("server reflection is served in binary protobuf only: use the proto codec")
}

func (binaryOnlyJSONCodec) Unmarshal([]byte, any) error {
	return errors.New("server reflection is served in binary protobuf only: use the proto codec")
}

// serve answers each request on the stream in order until the client closes its side.
func (r *reflector) serve(_ context.Context, stream *connect.BidiStream[wireMessage, wireMessage]) error {
	sent := map[string]bool{} // files already sent on this stream (only their paths)
	for {
		req, err := stream.Receive()
		if errors.Is(err, io.EOF) {
			return nil
		} else if err != nil {
			return err
		}
		res, err := r.answer(req.b, sent)
		if err != nil {
			return err
		}
		if err := stream.Send(&wireMessage{b: res}); err != nil {
			return err
		}
	}
}

// reflectionRequest is a decoded ServerReflectionRequest: its host and the one request of
// its oneof that was set last (field 0 when none).
type reflectionRequest struct {
	host     string
	field    protowire.Number
	name     string // the string of fields 3, 4, 6 and 7; the containing type of field 5
	extField int32  // field 5's extension number
}

// decodeReflectionRequest parses b; malformed input is an InvalidArgument error.
func decodeReflectionRequest(b []byte) (reflectionRequest, error) {
	var req reflectionRequest
	var inner error
	err := rangeFields(b, func(num protowire.Number, typ protowire.Type, v []byte, _ uint64) {
		if typ != protowire.BytesType {
			return
		}
		switch num {
		case reqHost:
			req.host = string(v)
		case reqFileByFilename, reqFileContainingSymbol, reqAllExtensionNumbersOfType, reqListServices:
			req.field, req.name, req.extField = num, string(v), 0
		case reqFileContainingExtension:
			req.field, req.name, req.extField = num, "", 0
			inner = rangeFields(v, func(num protowire.Number, typ protowire.Type, v []byte, x uint64) {
				switch {
				case num == 1 && typ == protowire.BytesType:
					req.name = string(v)
				case num == 2 && typ == protowire.VarintType:
					req.extField = int32(x)
				}
			})
		}
	})
	if err = errors.Join(err, inner); err != nil {
		return reflectionRequest{}, connect.NewError(connect.CodeInvalidArgument, fmt.Errorf("malformed reflection request: %w", err))
	}
	return req, nil
}

// rangeFields calls f with each field of the encoded message b: its number and type, and the
// contents of a length-delimited field or the value of a varint (other types are skipped, as
// are unknown fields by the caller). Malformed input is an error.
func rangeFields(b []byte, f func(num protowire.Number, typ protowire.Type, v []byte, x uint64)) error {
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return protowire.ParseError(n)
		}
		b = b[n:]
		var v []byte
		var x uint64
		switch typ {
		case protowire.BytesType:
			v, n = protowire.ConsumeBytes(b)
		case protowire.VarintType:
			x, n = protowire.ConsumeVarint(b)
		default:
			n = protowire.ConsumeFieldValue(num, typ, b)
		}
		if n < 0 {
			return protowire.ParseError(n)
		}
		b = b[n:]
		f(num, typ, v, x)
	}
	return nil
}

// answer builds the ServerReflectionResponse to one encoded request.
func (r *reflector) answer(raw []byte, sent map[string]bool) ([]byte, error) {
	req, err := decodeReflectionRequest(raw)
	if err != nil {
		return nil, err
	}
	var out []byte
	if req.host != "" {
		out = protowire.AppendTag(out, resValidHost, protowire.BytesType)
		out = protowire.AppendString(out, req.host)
	}
	out = protowire.AppendTag(out, resOriginalRequest, protowire.BytesType)
	out = protowire.AppendBytes(out, raw)
	files := func(fd protoreflect.FileDescriptor, err error) []byte {
		if err == nil {
			var list [][]byte
			if list, err = fileWithDependencies(fd, sent); err == nil {
				var body []byte
				for _, f := range list {
					body = protowire.AppendTag(body, 1, protowire.BytesType)
					body = protowire.AppendBytes(body, f)
				}
				return appendMessage(out, resFileDescriptorResponse, body)
			}
		}
		return appendNotFound(out, err)
	}
	switch req.field {
	case reqFileByFilename:
		return files(r.files.FindFileByPath(req.name)), nil
	case reqFileContainingSymbol:
		d, err := r.files.FindDescriptorByName(protoreflect.FullName(req.name))
		if err != nil {
			return files(nil, err), nil
		}
		if d.ParentFile() == nil {
			return files(nil, fmt.Errorf("no file for symbol %s", req.name)), nil
		}
		return files(d.ParentFile(), nil), nil
	case reqFileContainingExtension:
		ext, err := r.extensions.FindExtensionByNumber(protoreflect.FullName(req.name), protoreflect.FieldNumber(req.extField))
		if err != nil {
			return files(nil, err), nil
		}
		if ext.TypeDescriptor().ParentFile() == nil {
			return files(nil, fmt.Errorf("no file for extension %d of message %s", req.extField, req.name)), nil
		}
		return files(ext.TypeDescriptor().ParentFile(), nil), nil
	case reqAllExtensionNumbersOfType:
		nums := []int32{}
		r.extensions.RangeExtensionsByMessage(protoreflect.FullName(req.name), func(e protoreflect.ExtensionType) bool {
			nums = append(nums, int32(e.TypeDescriptor().Number()))
			return true
		})
		if len(nums) == 0 {
			if _, err := r.files.FindDescriptorByName(protoreflect.FullName(req.name)); err != nil {
				return appendNotFound(out, err), nil
			}
		}
		slices.Sort(nums)
		body := protowire.AppendTag(nil, 1, protowire.BytesType)
		body = protowire.AppendString(body, req.name)
		if len(nums) > 0 {
			var packed []byte
			for _, x := range nums {
				packed = protowire.AppendVarint(packed, uint64(x))
			}
			body = protowire.AppendTag(body, 2, protowire.BytesType)
			body = protowire.AppendBytes(body, packed)
		}
		return appendMessage(out, resAllExtensionNumbersResponse, body), nil
	case reqListServices:
		var body []byte
		for _, name := range r.services {
			svc := protowire.AppendTag(nil, 1, protowire.BytesType)
			svc = protowire.AppendString(svc, name)
			body = appendMessage(body, 1, svc)
		}
		return appendMessage(out, resListServicesResponse, body), nil
	}
	return nil, connect.NewError(connect.CodeInvalidArgument, errors.New("invalid MessageRequest: no request is set"))
}

// appendMessage appends an embedded message field.
func appendMessage(b []byte, num protowire.Number, body []byte) []byte {
	b = protowire.AppendTag(b, num, protowire.BytesType)
	return protowire.AppendBytes(b, body)
}

// appendNotFound appends an ErrorResponse with gRPC's NOT_FOUND code and err's text.
func appendNotFound(b []byte, err error) []byte {
	body := protowire.AppendTag(nil, 1, protowire.VarintType)
	body = protowire.AppendVarint(body, uint64(connect.CodeNotFound))
	body = protowire.AppendTag(body, 2, protowire.BytesType)
	body = protowire.AppendString(body, err.Error())
	return appendMessage(b, resErrorResponse, body)
}

// fileWithDependencies encodes root and, breadth first, every file it imports that this stream
// has not been sent yet (root itself always), each once; a placeholder root (a missing
// dependency) is not found.
func fileWithDependencies(root protoreflect.FileDescriptor, sent map[string]bool) ([][]byte, error) {
	if root.IsPlaceholder() {
		return nil, protoregistry.NotFound
	}
	var out [][]byte
	visited := map[string]bool{}
	queue := []protoreflect.FileDescriptor{root}
	for len(queue) > 0 {
		fd := queue[0]
		queue = queue[1:]
		if fd.IsPlaceholder() || visited[fd.Path()] {
			continue
		}
		visited[fd.Path()] = true
		if len(out) == 0 || !sent[fd.Path()] {
			sent[fd.Path()] = true
			b, err := proto.Marshal(protodesc.ToFileDescriptorProto(fd))
			if err != nil {
				return nil, err
			}
			out = append(out, b)
		}
		imports := fd.Imports()
		for i := range imports.Len() {
			queue = append(queue, imports.Get(i).FileDescriptor)
		}
	}
	return out, nil
}
