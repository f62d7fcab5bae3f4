package buildinfo

import (
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
