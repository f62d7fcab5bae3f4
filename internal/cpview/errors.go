package cpview

import (
	"errors"
	"fmt"

	"connectrpc.com/connect"

	"github.com/rbookhq/rbook-action/action/cpclient"
)

// Target is where a control-plane command's call went, for its error message.
type Target struct {
	// URL is the control plane's address, "" when it cannot be resolved; From names where it
	// came from ("--control-plane" or "RBOOK_CONTROL_PLANE").
	URL, From string
	// URLFile is the embedded control plane's address file when the URL came from it, else "".
	URLFile string
	// RunWords is the command whose run starts the embedded control plane ("rbook run").
	RunWords string
	// SentToken says the call carried $RBOOK_TOKEN.
	SentToken bool
	// Listening reports whether something listens at one of the URLs of a list.
	Listening func(urls string) bool
}

// CallError is the one-line message (plus hints on their own lines) of a control-plane call
// that failed with err: the server's message and code, what to do when the control plane did
// not answer in time, was not running (an embedded one whose run ended, nothing listening at
// the address) or refused credentials; for a watch whose retries ran out, the client's own
// words naming the URL.
func CallError(err error, t Target) string {
	var ue *cpclient.UnreachableError
	if errors.As(err, &ue) && ue.Last != nil {
		// A command's retries ran out (watch): a refused connection gets the hints below;
		// anything else is said as the client says it, naming the URL.
		if ce := (*connect.Error)(nil); !errors.As(ue.Last, &ce) || ce.Code() != connect.CodeUnavailable {
			return "rbook: " + ue.Error()
		}
		err = ue.Last
	}
	if msg := unanswered(err, t); msg != "" {
		return msg
	}
	var ce *connect.Error
	if !errors.As(err, &ce) {
		return "rbook: " + err.Error()
	}
	msg := fmt.Sprintf("rbook: %s (%s)", ce.Message(), ce.Code())
	if h := RPCHint(err, t.URL, t.SentToken); h != "" {
		msg += "\n" + h
	}
	if t.URLFile != "" && ce.Code() == connect.CodeUnavailable {
		msg += fmt.Sprintf("\nThe embedded control plane named in %s is not running any more (its '%s' has ended). Pass --control-plane URL for another one.", t.URLFile, t.RunWords)
	} else if t.URL != "" && ce.Code() == connect.CodeUnavailable && !t.Listening(t.URL) {
		// A bare "connection refused" does not say what to do: name the address and where it
		// came from.
		msg += fmt.Sprintf("\nNothing listens at %s (from %s): start the control plane there ('rbook serve --addr HOST:PORT'), or point --control-plane at a running one.", t.URL, t.From)
	}
	return msg
}

// unanswered is the message for a call that got no answer from the control plane (not a
// refusal: the error carries no rbook code), naming its URL and where the URL came from: a
// transport timeout, or — where something listens at the URL — a connection that was lost
// without an answer (the server took the connection but stopped answering, and the HTTP/2
// pings that watch it went unanswered: cpclient.PingTimeout). "" for any other error. A bare
// "context deadline exceeded" or "client connection lost" does not say which control plane
// was asked, nor what to do; which of the two comes first depends on the call's deadline.
func unanswered(err error, t Target) string {
	var ce *connect.Error
	if !errors.As(err, &ce) || cpclient.Code(err) != "" {
		return ""
	}
	how := "in time (" + ce.Code().String() + ")"
	switch {
	case ce.Code() == connect.CodeDeadlineExceeded:
	case ce.Code() == connect.CodeUnavailable && t.URLFile == "" && t.URL != "" && t.Listening != nil && t.Listening(t.URL):
		how = "(" + ce.Message() + ")"
	default:
		return ""
	}
	u, from := t.URL, t.From
	if u == "" {
		u = "the control plane"
	}
	if t.URLFile != "" {
		from = t.URLFile
	}
	return fmt.Sprintf("rbook: the control plane at %s (from %s) did not answer %s: check that it runs and that this machine reaches it, or point --control-plane at one that does.", u, from, how)
}
