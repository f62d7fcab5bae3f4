package cpview

import (
	"maps"
	"strings"
	"testing"
)

// rbook approve's --input flags become the map Approve carries; a flag that is not
// NAME=VALUE or names a field twice is refused before anything is sent.
func TestApproveInputFlagsParse(t *testing.T) {
	got, err := ParseInputFlags([]string{"target=blue", "note=a=b", "empty="})
	if want := map[string]string{"target": "blue", "note": "a=b", "empty": ""}; err != nil || !maps.Equal(got, want) {
		t.Fatalf("ParseInputFlags = %v, %v; want %v", got, err, want)
	}
	for _, tc := range []struct {
		flags []string
		msg   string
	}{
		{[]string{"target"}, `--input "target": write NAME=VALUE`},
		{[]string{"=blue"}, `--input "=blue": write NAME=VALUE`},
		{[]string{"target=blue", "target=green"}, "--input target is given twice"},
	} {
		if _, err := ParseInputFlags(tc.flags); err == nil || !strings.Contains(err.Error(), tc.msg) {
			t.Errorf("ParseInputFlags(%q) = %v; want %q", tc.flags, err, tc.msg)
		}
	}
}
