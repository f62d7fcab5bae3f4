package cpview

import (
	"context"
	"errors"
	"strings"
	"testing"

	"connectrpc.com/connect"
)

// TestAControlPlaneThatDoesNotAnswerIsNamed: a call that got no answer — its deadline passed,
// or the connection to a server that took it but stopped answering was lost — is said naming
// the control plane's URL and where it came from; a refusal, or nothing listening at all,
// is not said to be a silence.
func TestAControlPlaneThatDoesNotAnswerIsNamed(t *testing.T) {
	const url = "http://127.0.0.1:7443"
	silent := "rbook: the control plane at " + url + " (from --control-plane) did not answer "
	for _, tc := range []struct {
		name      string
		err       error
		listening bool
		want      string
	}{
		{"the deadline passed", connect.NewError(connect.CodeDeadlineExceeded, context.DeadlineExceeded), true,
			silent + "in time (deadline_exceeded)"},
		{"the connection was lost", connect.NewError(connect.CodeUnavailable, errors.New("http2: client connection lost")), true,
			silent + "(http2: client connection lost)"},
		{"nothing listens", connect.NewError(connect.CodeUnavailable, errors.New("dial tcp: connection refused")), false,
			"Nothing listens at " + url},
		{"a refusal", connect.NewError(connect.CodePermissionDenied, errors.New("not allowed")), true,
			"rbook: not allowed (permission_denied)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tgt := Target{URL: url, From: "--control-plane", Listening: func(string) bool { return tc.listening }}
			got := CallError(tc.err, tgt)
			if !strings.Contains(got, tc.want) {
				t.Errorf("CallError = %q\nwant it to say %q", got, tc.want)
			}
			if isSilence := strings.Contains(got, "did not answer"); isSilence != strings.HasPrefix(tc.want, silent) {
				t.Errorf("CallError = %q: said as a silence %v", got, isSilence)
			}
		})
	}
}
