package server

import "connectrpc.com/connect"

// TraceInterceptor is the handler interceptor that makes each RPC's server span (tests and
// benchmarks only).
func TraceInterceptor() connect.Interceptor { return traceInterceptor{} }
