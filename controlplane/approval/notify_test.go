package approval

import (
	"reflect"
	"strings"
	"testing"
)

// A rule's notify list is read in order and handed to the gate's requirement.
func TestGatePolicyNotifyListReachesTheRequirement(t *testing.T) {
	p, err := ParseGatePolicy([]byte(`rules:
  - runbook: deploy-*
    approvers: ["group:sre"]
    notify: ["person:carol", "group:oncall", "email:ops@example.com"]
  - approvals: 1
`), "gates.yaml")
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"person:carol", "group:oncall", "email:ops@example.com"}
	if got := p.For("deploy-web", "confirm").Notify; !reflect.DeepEqual(got, want) {
		t.Errorf("Notify = %v, want %v", got, want)
	}
	if got := p.For("other", "confirm").Notify; got != nil {
		t.Errorf("a rule without notify gave %v, want none", got)
	}
}

// A notify entry that could reach nobody stops the load at its line, with the field.
func TestGatePolicyNotifyEntriesAreChecked(t *testing.T) {
	for _, tc := range []struct{ entry, want string }{
		{`"github:alice"`, `gates.yaml:3: rules[0].notify: "github:alice" is not "person:<id>", "group:<name>" or "email:<address>"`},
		{`"email:not an address"`, `gates.yaml:3: rules[0].notify: "email:not an address": want email:<address>`},
		{`"email:Ops <ops@example.com>"`, `want email:<address>`},
		{`"person:a b"`, `"person:a b": no person of a people file could have that name`},
		{`"group:"`, `"group:": no group of a people file could have that name`},
		{`"person:carol", "person:carol"`, `"person:carol" is listed twice`},
	} {
		_, err := ParseGatePolicy([]byte("rules:\n  - gate: x\n    notify: ["+tc.entry+"]\n"), "gates.yaml")
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("notify [%s]: err = %v, want …%s…", tc.entry, err, tc.want)
		}
	}
	_, err := ParseGatePolicy([]byte("rules:\n  - notify: person:carol\n"), "gates.yaml")
	if err == nil || !strings.Contains(err.Error(), "gates.yaml:2: rules[0].notify: want a list of") {
		t.Errorf("a notify that is no list: err = %v", err)
	}
}
