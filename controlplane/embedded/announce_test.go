package embedded

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"
)

// The first start says once where the signing key was generated and how to verify with it,
// as it says where the approval secret was generated; a later start says nothing of it.
func TestFirstStartAnnouncesTheSigningKeyOnce(t *testing.T) {
	t.Chdir(t.TempDir())
	t.Setenv("RBOOK_APPROVAL_SECRET", "")
	t.Setenv("RBOOK_SECRET", "")
	const want = "Generated the embedded control plane's attestation signing key in " + SigningKey
	for i, announced := range []bool{true, false} {
		var errw bytes.Buffer
		url, stop, err := Start(context.Background(), &errw, Options{LockRetry: 5 * time.Second})
		if err != nil || url == "" {
			t.Fatalf("start %d: url %q, %v: %s", i+1, url, err, errw.String())
		}
		stop()
		if got := strings.Contains(errw.String(), want); got != announced {
			t.Fatalf("start %d said %q; announced %v, want %v", i+1, errw.String(), got, announced)
		}
		if announced && !strings.Contains(errw.String(), "rbook evidence verify --key "+SigningKey) {
			t.Fatalf("start %d does not say how to verify with the key: %q", i+1, errw.String())
		}
	}
}
