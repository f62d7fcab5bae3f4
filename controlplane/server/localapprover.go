package server

import (
	"context"
	"crypto/subtle"
	"net"
	"net/netip"

	"connectrpc.com/connect"
)

// localApproverKey marks a context whose caller proved it holds Options.LocalApprover.
type localApproverKey struct{}

// localApproverInterceptor lets a caller that presents the local approver key as its bearer
// token, from a loopback peer, decide gates by approval id on a control plane without auth
// (the embedded control plane of a run on a laptop). The key is a random secret kept in a
// file only its owner can read (.rbook/local-approver-key, 0600), so holding it proves the
// caller is that user: being on loopback alone would not, as every local user can connect
// there. The comparison is constant-time; the key never reaches a log line or an error.
type localApproverInterceptor struct{ key []byte }

func (i localApproverInterceptor) WrapUnary(next connect.UnaryFunc) connect.UnaryFunc {
	return func(ctx context.Context, req connect.AnyRequest) (connect.AnyResponse, error) {
		if i.matches(req.Peer().Addr, req.Header().Values("Authorization")) {
			ctx = context.WithValue(ctx, localApproverKey{}, true)
		}
		return next(ctx, req)
	}
}

func (i localApproverInterceptor) WrapStreamingClient(next connect.StreamingClientFunc) connect.StreamingClientFunc {
	return next
}

func (i localApproverInterceptor) WrapStreamingHandler(next connect.StreamingHandlerFunc) connect.StreamingHandlerFunc {
	return next // deciding a gate is unary
}

// matches reports whether a request from peer with these Authorization header values carries
// the key, from a loopback address.
func (i localApproverInterceptor) matches(peer string, auth []string) bool {
	if len(i.key) == 0 || len(auth) != 1 || !loopbackPeer(peer) {
		return false
	}
	tok, ok := bearerToken(map[string][]string{"Authorization": auth})
	return ok && subtle.ConstantTimeCompare([]byte(tok), i.key) == 1
}

// loopbackPeer reports whether a peer address ("host:port") is a loopback address.
func loopbackPeer(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		host = addr
	}
	ip, err := netip.ParseAddr(host)
	return err == nil && ip.Unmap().IsLoopback()
}

// localApprover reports whether ctx's caller proved it holds the local approver key, or is
// the person at the keyboard of the embedded control plane (Options.LocalPerson; session.go).
func localApprover(ctx context.Context) bool {
	ok, _ := ctx.Value(localApproverKey{}).(bool)
	return ok || localPerson(ctx) != ""
}
