package buildinfo

import (
	"reflect"
	"runtime/debug"
	"strings"
	"testing"
)

// TestVersionFromBuildInfo covers the three kinds of build: go run (no module
// version, no VCS), a go build in a git checkout (pseudo-version, revision, dirty tree),
// and a release built with -ldflags -X main.version.
func TestVersionFromBuildInfo(t *testing.T) {
	goRun := From(&debug.BuildInfo{GoVersion: "go1.26.0", Main: debug.Module{Path: "github.com/rbookhq/rbook-action", Version: "(devel)"}}, true, "dev")
	if s := goRun.String(); !strings.HasPrefix(s, "rbook (devel) (module github.com/rbookhq/rbook-action)\nrevision unknown: built without VCS information (go run, -buildvcs=false, or outside a git checkout)\nbuilt with go1.26.0 for ") {
		t.Errorf("go run:\n%s", s)
	}
	checkout := From(&debug.BuildInfo{GoVersion: "go1.26.0", Main: debug.Module{Path: "github.com/rbookhq/rbook-action", Version: "v0.0.0-20260512103000-a1b2c3d4e5f6+dirty"},
		Settings: []debug.BuildSetting{{Key: "vcs", Value: "git"}, {Key: "vcs.revision", Value: "a1b2c3d4e5f60718293a4b5c6d7e8f9012345678"}, {Key: "vcs.time", Value: "2026-05-12T10:30:00Z"}, {Key: "vcs.modified", Value: "true"}}}, true, "dev")
	if s := checkout.String(); !strings.HasPrefix(s, "rbook v0.0.0-20260512103000-a1b2c3d4e5f6+dirty (module github.com/rbookhq/rbook-action)\nrevision a1b2c3d4e5f60718293a4b5c6d7e8f9012345678 (committed 2026-05-12T10:30:00Z, with uncommitted changes)\n") {
		t.Errorf("checkout:\n%s", s)
	}
	if v := From(nil, false, "v1.2.3"); v.Version != "v1.2.3" || v.Revision != "" {
		t.Errorf("ldflags: %+v", v)
	}
}

// A build without VCS information (the container image's: -buildvcs=false) names the
// revision stamped at link time; the build info's own vcs.revision wins over it.
func TestStampedRevisionNamesTheCommit(t *testing.T) {
	const stamped = "0123456789abcdef0123456789abcdef01234567"
	defer func(old string) { revision = old }(revision)
	revision = stamped
	image := From(&debug.BuildInfo{GoVersion: "go1.26.0", Main: debug.Module{Path: "github.com/rbookhq/rbook-action", Version: "(devel)"}}, true, "v1.4.0")
	if s := image.String(); !strings.HasPrefix(s, "rbook v1.4.0 (module github.com/rbookhq/rbook-action)\nrevision "+stamped+"\n") {
		t.Errorf("stamped build:\n%s", s)
	}
	if l := image.Line(); l != "rbook v1.4.0 (0123456789ab)" {
		t.Errorf("stamped build's line %q", l)
	}
	vcs := From(&debug.BuildInfo{Settings: []debug.BuildSetting{{Key: "vcs.revision", Value: "a1b2c3d4e5f60718293a4b5c6d7e8f9012345678"}}}, true, "")
	if vcs.Revision != "a1b2c3d4e5f60718293a4b5c6d7e8f9012345678" {
		t.Errorf("vcs.revision replaced by the stamp: %q", vcs.Revision)
	}
}

// RevisionLDFlag names this package's revision variable, so the -X flag of scripts/image.sh
// reaches it (a renamed package or variable would leave the stamp silently unused).
func TestRevisionLDFlagNamesThisPackagesVariable(t *testing.T) {
	type probe struct{}
	pkg := reflect.TypeOf(probe{}).PkgPath()
	if RevisionLDFlag != pkg+".revision" {
		t.Errorf("RevisionLDFlag %q, want %q", RevisionLDFlag, pkg+".revision")
	}
}
