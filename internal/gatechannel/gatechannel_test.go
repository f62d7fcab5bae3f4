package gatechannel

import "testing"

func TestTerminalReasonIsRecognisedAndCarriesNoControlCharacters(t *testing.T) {
	cases := []struct{ answer, want string }{
		{"yes", "answered at the executor's terminal: yes"},
		{"", "answered at the executor's terminal: "},
		{"ye\x1b[Ds\tno\u202e", "answered at the executor's terminal: ye\uFFFD[Ds\uFFFDno\uFFFD"},
	}
	for _, tc := range cases {
		got := TerminalReason(tc.answer)
		if got != tc.want {
			t.Errorf("TerminalReason(%q) = %q, want %q", tc.answer, got, tc.want)
		}
		if !IsTerminalReason(got) {
			t.Errorf("IsTerminalReason(%q) = false, want true", got)
		}
	}
	for _, reason := range []string{"", "yes", "not now", "answered at the executor's terminal"} {
		if IsTerminalReason(reason) {
			t.Errorf("IsTerminalReason(%q) = true, want false", reason)
		}
	}
}
