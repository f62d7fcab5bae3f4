package store

import (
	"context"
	"errors"
	"strings"
	"testing"
)

// The key-check values of three secrets A, B and C (any 64 hex characters will do here).
var (
	checkA = strings.Repeat("a", 64)
	checkB = strings.Repeat("b", 64)
	checkC = strings.Repeat("c", 64)
)

// A rotation of the approval secret across replicas, start by start, as docs/tls.md
// ("Rotating the approval secret") describes it: each row is one replica starting with its
// current and previous secrets; the database's record decides whether it may serve.
func TestSecretChecksFollowARotationAndRefuseDisagreeingReplicas(t *testing.T) {
	s, _ := openTest(t)
	ctx := context.Background()
	steps := []struct {
		name              string
		current, previous string
		replace           bool
		want              SecretAgreement
		wantErr           error
	}{
		{name: "first start records A", current: checkA, want: SecretRecorded},
		{name: "a replica with A agrees", current: checkA, want: SecretAgrees},
		{name: "a replica with C is refused", current: checkC, wantErr: ErrSecretDisagrees},
		{name: "A signing and B verifying agrees", current: checkA, previous: checkB, want: SecretAgrees},
		{name: "B with previous A rotates", current: checkB, previous: checkA, want: SecretRotated},
		{name: "a replica not yet rotated still starts", current: checkA, previous: checkB, want: SecretRotationPending},
		{name: "a replica with only A is refused once B is current", current: checkA, wantErr: ErrSecretDisagrees},
		{name: "B with previous A again agrees", current: checkB, previous: checkA, want: SecretAgrees},
		{name: "B alone completes the rotation", current: checkB, want: SecretAgrees},
		{name: "A signing after the rotation completed is refused", current: checkA, previous: checkB, wantErr: ErrSecretRetired},
		{name: "C with previous A (the retired one) is refused", current: checkC, previous: checkA, wantErr: ErrSecretDisagrees},
		{name: "C with previous B rotates again", current: checkC, previous: checkB, want: SecretRotated},
		{name: "a lost secret: A replaced on request", current: checkA, replace: true, want: SecretReplaced},
		{name: "C is now refused", current: checkC, wantErr: ErrSecretDisagrees},
	}
	for _, st := range steps {
		got, err := s.CheckSecret(ctx, "approval", st.current, st.previous, st.replace)
		if st.wantErr != nil {
			if !errors.Is(err, st.wantErr) {
				t.Fatalf("%s: got %q, %v; want %v", st.name, got, err, st.wantErr)
			}
			continue
		}
		if err != nil || got != st.want {
			t.Fatalf("%s: got %q, %v; want %q", st.name, got, err, st.want)
		}
	}
}

func TestSecretCheckRefusesMalformedValues(t *testing.T) {
	s, _ := openTest(t)
	for _, v := range [][2]string{{"", ""}, {"abc", ""}, {checkA, "abc"}} {
		if _, err := s.CheckSecret(context.Background(), "approval", v[0], v[1], false); !errors.Is(err, ErrInvalidArgument) {
			t.Errorf("CheckSecret(%q, %q): %v, want ErrInvalidArgument", v[0], v[1], err)
		}
	}
}
