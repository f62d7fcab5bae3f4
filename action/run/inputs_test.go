package run

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestGivenInputsRefusals: each malformed --input or --inputs file is refused with a message
// naming the flag, the file and line, or the entry.
func TestGivenInputsRefusals(t *testing.T) {
	for _, tc := range []struct {
		name, file string
		flags      []string
		want       string
	}{
		{"an input without =", "", []string{"version"}, `--input "version": write NAME=VALUE`},
		{"an input given twice", "", []string{"a=1", "a=2"}, "--input a: the input is given twice"},
		{"a file that is no mapping", "- a\n- b\n", nil, ":1:1: --inputs must be a mapping of input names to values"},
		{"a null value", "a: null\n", nil, ":1:4: a: an input value must be a string, number or boolean"},
		{"a key given twice", "a: 1\na: 2\n", nil, "a: the input is given twice"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			file := ""
			if tc.file != "" {
				file = filepath.Join(t.TempDir(), "inputs.yaml")
				if err := os.WriteFile(file, []byte(tc.file), 0o600); err != nil {
					t.Fatal(err)
				}
			}
			_, err := GivenInputs(file, tc.flags)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("GivenInputs = %v; want %q", err, tc.want)
			}
		})
	}
}

// TestGivenInputsFlagsWinOverTheFile: --input NAME=VALUE overrides the same name in --inputs.
func TestGivenInputsFlagsWinOverTheFile(t *testing.T) {
	file := filepath.Join(t.TempDir(), "inputs.yaml")
	if err := os.WriteFile(file, []byte("version: 1.0\nenv: prod\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	got, err := GivenInputs(file, []string{"version=2.0"})
	if err != nil || got["version"] != "2.0" || got["env"] != "prod" || len(got) != 2 {
		t.Fatalf("GivenInputs = %v, %v; want version=2.0 (the flag) and env=prod (the file)", got, err)
	}
}
