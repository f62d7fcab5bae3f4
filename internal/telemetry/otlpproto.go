package telemetry

import (
	"math"

	"google.golang.org/protobuf/encoding/protowire"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/sdk/instrumentation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
)

// This file writes an OTLP ExportTraceServiceRequest in the protobuf wire format, field by
// field with protowire, from the OpenTelemetry protocol's published .proto files
// (opentelemetry/proto/collector/trace/v1/trace_service.proto, trace/v1/trace.proto,
// common/v1/common.proto, resource/v1/resource.proto). The field numbers are those files'.
// Fields at their default value are left out, as a protobuf encoder does.

// The span flags of trace.proto's SpanFlags: whether the parent's remoteness is known, and
// whether it is remote.
const (
	flagContextHasIsRemote = 0x100
	flagContextIsRemote    = 0x200
)

// encodeTraces is the ExportTraceServiceRequest of spans: one ResourceSpans per resource,
// one ScopeSpans per instrumentation scope within it, the spans in the order given.
func encodeTraces(spans []sdktrace.ReadOnlySpan) []byte {
	type scopeKey struct {
		res   attribute.Distinct
		scope instrumentation.Scope
	}
	type resourceGroup struct {
		res    *resource.Resource
		scopes []scopeKey
	}
	var order []attribute.Distinct
	groups := map[attribute.Distinct]*resourceGroup{}
	byScope := map[scopeKey][]sdktrace.ReadOnlySpan{}
	for _, s := range spans {
		if s == nil {
			continue
		}
		rk := s.Resource().Equivalent()
		g := groups[rk]
		if g == nil {
			g = &resourceGroup{res: s.Resource()}
			groups[rk] = g
			order = append(order, rk)
		}
		k := scopeKey{rk, s.InstrumentationScope()}
		if _, ok := byScope[k]; !ok {
			g.scopes = append(g.scopes, k)
		}
		byScope[k] = append(byScope[k], s)
	}
	var req []byte
	for _, rk := range order {
		g := groups[rk]
		var rs []byte
		rs = appendMessage(rs, 1, appendKeyValues(nil, 1, g.res.Attributes())) // ResourceSpans.resource
		for _, k := range g.scopes {
			var ss []byte
			ss = appendMessage(ss, 1, encodeScope(k.scope)) // ScopeSpans.scope
			for _, s := range byScope[k] {
				ss = appendMessage(ss, 2, encodeSpan(s)) // ScopeSpans.spans
			}
			ss = appendString(ss, 3, k.scope.SchemaURL)
			rs = appendMessage(rs, 2, ss) // ResourceSpans.scope_spans
		}
		rs = appendString(rs, 3, g.res.SchemaURL())
		req = appendMessage(req, 1, rs) // ExportTraceServiceRequest.resource_spans
	}
	return req
}

// encodeScope is an InstrumentationScope.
func encodeScope(s instrumentation.Scope) []byte {
	var b []byte
	b = appendString(b, 1, s.Name)
	b = appendString(b, 2, s.Version)
	return appendKeyValues(b, 3, s.Attributes.ToSlice())
}

// encodeSpan is a Span.
func encodeSpan(s sdktrace.ReadOnlySpan) []byte {
	sc := s.SpanContext()
	tid, sid := sc.TraceID(), sc.SpanID()
	var b []byte
	b = appendBytes(b, 1, tid[:])
	b = appendBytes(b, 2, sid[:])
	b = appendString(b, 3, sc.TraceState().String())
	if p := s.Parent().SpanID(); p.IsValid() {
		b = appendBytes(b, 4, p[:])
	}
	b = appendString(b, 5, s.Name())
	b = appendVarint(b, 6, uint64(spanKind(s.SpanKind())))
	b = appendFixed64(b, 7, unixNano(s.StartTime().UnixNano()))
	b = appendFixed64(b, 8, unixNano(s.EndTime().UnixNano()))
	b = appendKeyValues(b, 9, s.Attributes())
	b = appendVarint(b, 10, clampUint32(s.DroppedAttributes()))
	for _, e := range s.Events() {
		var eb []byte
		eb = appendFixed64(eb, 1, unixNano(e.Time.UnixNano()))
		eb = appendString(eb, 2, e.Name)
		eb = appendKeyValues(eb, 3, e.Attributes)
		eb = appendVarint(eb, 4, clampUint32(e.DroppedAttributeCount))
		b = appendMessage(b, 11, eb)
	}
	b = appendVarint(b, 12, clampUint32(s.DroppedEvents()))
	for _, l := range s.Links() {
		ltid, lsid := l.SpanContext.TraceID(), l.SpanContext.SpanID()
		var lb []byte
		lb = appendBytes(lb, 1, ltid[:])
		lb = appendBytes(lb, 2, lsid[:])
		lb = appendString(lb, 3, l.SpanContext.TraceState().String())
		lb = appendKeyValues(lb, 4, l.Attributes)
		lb = appendVarint(lb, 5, clampUint32(l.DroppedAttributeCount))
		lb = appendFixed32(lb, 6, spanFlags(l.SpanContext.TraceFlags(), l.SpanContext))
		b = appendMessage(b, 13, lb)
	}
	b = appendVarint(b, 14, clampUint32(s.DroppedLinks()))
	st := s.Status()
	var sb []byte
	sb = appendString(sb, 2, st.Description)
	sb = appendVarint(sb, 3, statusCode(st.Code))
	b = appendMessage(b, 15, sb) // Span.status, always present (as the Go SDK's exporters send it)
	return appendFixed32(b, 16, spanFlags(sc.TraceFlags(), s.Parent()))
}

// spanFlags is Span.flags / Link.flags: the W3C trace flags in the low byte, and whether the
// parent (or linked) span context is remote.
func spanFlags(tf trace.TraceFlags, parent trace.SpanContext) uint32 {
	f := uint32(tf) | flagContextHasIsRemote
	if parent.IsRemote() {
		f |= flagContextIsRemote
	}
	return f
}

// spanKind is trace.proto's SpanKind of k (the same numbering: 1 internal … 5 consumer).
func spanKind(k trace.SpanKind) int {
	if k < trace.SpanKindInternal || k > trace.SpanKindConsumer {
		return 0
	}
	return int(k)
}

// statusCode is trace.proto's Status.StatusCode: 0 unset, 1 ok, 2 error.
func statusCode(c codes.Code) uint64 {
	switch c {
	case codes.Ok:
		return 1
	case codes.Error:
		return 2
	}
	return 0
}

func unixNano(n int64) uint64 { return uint64(max(0, n)) }

func clampUint32(v int) uint64 { return uint64(min(max(v, 0), math.MaxUint32)) }

// appendKeyValues appends each attribute as a KeyValue in field num.
func appendKeyValues(b []byte, num protowire.Number, kvs []attribute.KeyValue) []byte {
	for _, kv := range kvs {
		b = appendMessage(b, num, encodeKeyValue(kv))
	}
	return b
}

// encodeKeyValue is a KeyValue: the key and its AnyValue.
func encodeKeyValue(kv attribute.KeyValue) []byte {
	var b []byte
	b = appendString(b, 1, string(kv.Key))
	return protowire.AppendBytes(protowire.AppendTag(b, 2, protowire.BytesType), encodeValue(kv.Value))
}

// encodeValue is an AnyValue (common.proto): string 1, bool 2, int 3, double 4, array 5,
// kvlist 6, bytes 7; an empty value has no field set. The oneof member is always written,
// even at its zero value, so false, 0 and "" keep their type.
func encodeValue(v attribute.Value) []byte {
	var b []byte
	switch v.Type() {
	case attribute.STRING:
		b = protowire.AppendBytes(protowire.AppendTag(b, 1, protowire.BytesType), []byte(v.AsString()))
	case attribute.BOOL:
		b = protowire.AppendVarint(protowire.AppendTag(b, 2, protowire.VarintType), protowire.EncodeBool(v.AsBool()))
	case attribute.INT64:
		b = protowire.AppendVarint(protowire.AppendTag(b, 3, protowire.VarintType), uint64(v.AsInt64()))
	case attribute.FLOAT64:
		b = protowire.AppendFixed64(protowire.AppendTag(b, 4, protowire.Fixed64Type), math.Float64bits(v.AsFloat64()))
	case attribute.BYTESLICE:
		b = protowire.AppendBytes(protowire.AppendTag(b, 7, protowire.BytesType), v.AsByteSlice())
	case attribute.MAP:
		b = protowire.AppendBytes(protowire.AppendTag(b, 6, protowire.BytesType), appendKeyValues(nil, 1, v.AsMap()))
	case attribute.BOOLSLICE, attribute.INT64SLICE, attribute.FLOAT64SLICE, attribute.STRINGSLICE, attribute.SLICE:
		var arr []byte
		for _, e := range sliceValues(v) {
			arr = protowire.AppendBytes(protowire.AppendTag(arr, 1, protowire.BytesType), encodeValue(e))
		}
		b = protowire.AppendBytes(protowire.AppendTag(b, 5, protowire.BytesType), arr)
	}
	return b
}

// sliceValues are the elements of a slice-typed value.
func sliceValues(v attribute.Value) []attribute.Value {
	var out []attribute.Value
	switch v.Type() {
	case attribute.BOOLSLICE:
		for _, x := range v.AsBoolSlice() {
			out = append(out, attribute.BoolValue(x))
		}
	case attribute.INT64SLICE:
		for _, x := range v.AsInt64Slice() {
			out = append(out, attribute.Int64Value(x))
		}
	case attribute.FLOAT64SLICE:
		for _, x := range v.AsFloat64Slice() {
			out = append(out, attribute.Float64Value(x))
		}
	case attribute.STRINGSLICE:
		for _, x := range v.AsStringSlice() {
			out = append(out, attribute.StringValue(x))
		}
	case attribute.SLICE:
		out = v.AsSlice()
	}
	return out
}

// The append helpers write one field, leaving out a default (empty or zero) value.

func appendMessage(b []byte, num protowire.Number, m []byte) []byte {
	return protowire.AppendBytes(protowire.AppendTag(b, num, protowire.BytesType), m)
}

func appendBytes(b []byte, num protowire.Number, v []byte) []byte {
	if len(v) == 0 {
		return b
	}
	return protowire.AppendBytes(protowire.AppendTag(b, num, protowire.BytesType), v)
}

func appendString(b []byte, num protowire.Number, s string) []byte {
	if s == "" {
		return b
	}
	return protowire.AppendString(protowire.AppendTag(b, num, protowire.BytesType), s)
}

func appendVarint(b []byte, num protowire.Number, v uint64) []byte {
	if v == 0 {
		return b
	}
	return protowire.AppendVarint(protowire.AppendTag(b, num, protowire.VarintType), v)
}

func appendFixed64(b []byte, num protowire.Number, v uint64) []byte {
	if v == 0 {
		return b
	}
	return protowire.AppendFixed64(protowire.AppendTag(b, num, protowire.Fixed64Type), v)
}

func appendFixed32(b []byte, num protowire.Number, v uint32) []byte {
	if v == 0 {
		return b
	}
	return protowire.AppendFixed32(protowire.AppendTag(b, num, protowire.Fixed32Type), v)
}
