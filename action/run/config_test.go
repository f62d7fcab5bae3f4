package run

import (
	"context"
	"strings"
	"testing"

	"github.com/rbookhq/rbook-action/action/state"
)

// TestStateFileNamesTheControlPlaneOnlyWhenNoneIsGiven: a state file's separate control plane
// is the run's only when neither --control-plane nor $RBOOK_CONTROL_PLANE names one; it is
// taken in one spelling, and a value that is not a control-plane list is refused naming the
// state file.
func TestStateFileNamesTheControlPlaneOnlyWhenNoneIsGiven(t *testing.T) {
	const path = ".rbook/demo.state.json"
	for _, tc := range []struct {
		name, given string
		st          *state.State
		wantOK      bool
		wantURL     string
		wantErr     string
	}{
		{"a control plane is given", "http://given:7070", &state.State{ControlPlane: "http://recorded:7070"}, false, "http://given:7070", ""},
		{"no state file", "", nil, false, "", ""},
		{"the state file names none", "", &state.State{}, false, "", ""},
		{"the state file names the embedded one", "", &state.State{ControlPlane: "http://127.0.0.1:41000", ControlPlaneEmbedded: true}, false, "", ""},
		{"the state file names replicas", "", &state.State{ControlPlane: "http://a:7070/, http://b:7070"}, true, "http://a:7070,http://b:7070", ""},
		{"the state file's value is no URL", "", &state.State{ControlPlane: "a:7070"}, true, "a:7070", "the state file " + path},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv("RBOOK_CONTROL_PLANE", "")
			var c Config
			if err := c.Resolve(tc.given); err != nil {
				t.Fatal(err)
			}
			got, ok, err := c.stateControlPlane(tc.st, path)
			if ok != tc.wantOK || got.ControlPlane != tc.wantURL {
				t.Errorf("stateControlPlane = %q, %v; want %q, %v", got.ControlPlane, ok, tc.wantURL, tc.wantOK)
			}
			if tc.wantErr == "" && err != nil || tc.wantErr != "" && (err == nil || !strings.HasPrefix(err.Error(), tc.wantErr)) {
				t.Errorf("error %v; want one starting %q", err, tc.wantErr)
			}
		})
	}
}

// TestAnInvalidControlPlaneIsKeptForTheDelivery: Resolve checks the configured control plane
// once; a delivery that needs it (the state file names none) fails with that same error.
func TestAnInvalidControlPlaneIsKeptForTheDelivery(t *testing.T) {
	var c Config
	resolveErr := c.Resolve("127.0.0.1:7070")
	if resolveErr == nil {
		t.Fatal("Resolve took a control plane without a scheme")
	}
	_, _, err := c.OutboxTarget(context.Background(), &state.State{RunID: "RBOOK-20260101-demo-00000001"})
	if err == nil || err.Error() != resolveErr.Error() {
		t.Errorf("OutboxTarget error %v; want Resolve's: %v", err, resolveErr)
	}
}
