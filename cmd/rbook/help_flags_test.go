package main

import (
	"regexp"
	"strings"
	"testing"

	"github.com/spf13/pflag"
)

// flagValueName is what a flag's value name (pflag's UnquoteUsage: the first `backticked`
// word of the usage, else the type) may look like: one word such as NAME, FILE, string.
var flagValueName = regexp.MustCompile(`^([A-Za-z][A-Za-z0-9_-]*)?$`)

// TestHelpFlagValueNames walks every command and fails on a flag whose usage
// would print a sentence fragment as its value name (the
// --control-plane-auth line read "--control-plane-auth permissions: id-token: write").
func TestHelpFlagValueNames(t *testing.T) {
	root := newRootCmd()
	cmds := append(everyCommand(root), root)
	n := 0
	for _, c := range cmds {
		check := func(f *pflag.Flag) {
			n++
			name, usage := pflag.UnquoteUsage(f)
			if !flagValueName.MatchString(name) || strings.Contains(usage, "`") {
				t.Errorf("%s --%s: value name %q, usage %q", c.CommandPath(), f.Name, name, usage)
			}
		}
		c.LocalFlags().VisitAll(check)
		c.InheritedFlags().VisitAll(check)
	}
	if n < 40 {
		t.Fatalf("only %d flags checked", n)
	}
}
