package e2e

import (
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// maxOwnInitBytes is what one of rbook's packages may allocate while it is initialised. Every
// command runs the initialisers of every package linked into the binary, so a package-level
// CEL environment, parsed template or compiled regexp costs `rbook --help` too: one pattern
// with a counted repetition such as {1,64} allocates more than this. Build such things on
// first use (sync.OnceValue, internal/lazyregexp). The start-up time itself is measured by
// scripts/startup-time.sh (docs/development.md, "Start-up time"), not by a test.
const maxOwnInitBytes = 8 << 10

// initTraceRE is one line of GODEBUG=inittrace=1: package, clock, heap bytes, allocations.
var initTraceRE = regexp.MustCompile(`(?m)^init (\S+) @[0-9.]+ ms, [0-9.]+ ms clock, ([0-9]+) bytes, ([0-9]+) allocs$`)

func TestRbookPackagesBuildNothingHeavyAtStartup(t *testing.T) {
	skipShort(t)
	out, code := rbookIn(t, t.TempDir(), []string{"GODEBUG=inittrace=1"}, "version")
	if code != 0 {
		t.Fatalf("rbook version exited %d:\n%s", code, out)
	}
	const own = "github.com/rbookhq/rbook-action/"
	seen := 0
	for _, m := range initTraceRE.FindAllStringSubmatch(out, -1) {
		pkg := m[1]
		// gen/ is generated protobuf code registering its descriptors: not rbook's to change.
		if pkg != "main" && (!strings.HasPrefix(pkg, own) || strings.HasPrefix(pkg, own+"gen/")) {
			continue
		}
		seen++
		bytes, _ := strconv.Atoi(m[2])
		if bytes > maxOwnInitBytes {
			t.Errorf("package %s allocates %d bytes (%s allocations) at start-up, over %d: build what a command needs when it first needs it", pkg, bytes, m[3], maxOwnInitBytes)
		}
	}
	// main, action/…, controlplane/…: a trace that lists none of them was not read right.
	if seen < 10 {
		t.Fatalf("the init trace lists %d of rbook's packages, want at least 10:\n%s", seen, out)
	}
}
