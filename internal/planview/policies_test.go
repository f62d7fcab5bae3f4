package planview

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rbookhq/rbook-action/action/cpclient"
	"github.com/rbookhq/rbook-action/controlplane/approval"
)

func TestLocalPoliciesSayWhereTheyCameFrom(t *testing.T) {
	gates, autoPass := filepath.Join("testdata", "gates.yaml"), filepath.Join("testdata", "trust-all.policy.yaml")
	cases := []struct {
		name, gates, autoPass   string
		wantGates, wantAutoPass string
		wantRule                string
		wantApprovals           int
	}{
		{name: "none given", wantGates: "none given: " + approval.DefaultRuleName, wantAutoPass: "the built-in rules", wantRule: "the default rule", wantApprovals: 1},
		{name: "both files", gates: gates, autoPass: autoPass, wantGates: gates, wantAutoPass: autoPass + ", then the built-in rules", wantRule: gates + " rule 1 (line 4)", wantApprovals: 2},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			o, err := LocalPolicies(tc.gates, tc.autoPass)
			if err != nil {
				t.Fatal(err)
			}
			r := o.Gates("shop", "confirm-shop")
			if o.GatePolicy != tc.wantGates || o.AutoPassPolicy != tc.wantAutoPass || r.Rule != tc.wantRule || r.Approvals != tc.wantApprovals {
				t.Fatalf("got %q, %q, rule %q of %d; want %q, %q, rule %q of %d", o.GatePolicy, o.AutoPassPolicy, r.Rule, r.Approvals,
					tc.wantGates, tc.wantAutoPass, tc.wantRule, tc.wantApprovals)
			}
		})
	}
}

func TestAPolicyFileThatDoesNotLoadNamesItsFlag(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "missing.yaml")
	if _, err := LocalPolicies(missing, ""); err == nil || !strings.HasPrefix(err.Error(), "--gate-policy: ") {
		t.Errorf("a missing gate policy: %v", err)
	}
	if _, err := LocalPolicies("", missing); err == nil || !strings.HasPrefix(err.Error(), "--playbook-policy: ") {
		t.Errorf("a missing auto-pass policy: %v", err)
	}
}

func TestAControlPlaneThatCannotBeAskedLeavesThePoliciesHere(t *testing.T) {
	o, err := LocalPolicies("", "")
	if err != nil {
		t.Fatal(err)
	}
	connect := func() (*cpclient.Client, func(), error) {
		return nil, nil, errors.New("connection refused\nretry later")
	}
	AskControlPlane(context.Background(), &o, loadShop(t), nil, "http://cp:7070", connect)
	note := " (the control plane http://cp:7070 decides with its own policy when the gate opens, and could not be asked: connection refused retry later; shown: this one)"
	if o.GatePolicy != "none given: "+approval.DefaultRuleName+note || o.AutoPassPolicy != "the built-in rules"+note {
		t.Fatalf("got %q and %q", o.GatePolicy, o.AutoPassPolicy)
	}
}
