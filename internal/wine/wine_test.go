package wine

import (
	"os"
	"runtime"
	"testing"
)

// underWineEnv is set by .ci/wine: the test binary is known to run under Wine there, so
// detection must say so (otherwise every Wine skip would silently never trigger, and the
// tests that need one would fail instead).
const underWineEnv = "RBOOK_TEST_UNDER_WINE"

func TestVersionDetectsWine(t *testing.T) {
	v, ok := Version()
	switch {
	case os.Getenv(underWineEnv) == "1":
		if !ok || v == "" {
			t.Fatalf("Version() = %q, %v under Wine; want Wine's version and true", v, ok)
		}
		t.Logf("running under Wine %s", v)
	case runtime.GOOS != "windows":
		if ok || v != "" {
			t.Fatalf("Version() = %q, %v on %s; want \"\", false", v, ok, runtime.GOOS)
		}
	}
}

func TestSkipSkipsOnlyUnderWine(t *testing.T) {
	_, underWine := Version()
	var skipped bool
	t.Run("probe", func(t *testing.T) {
		defer func() { skipped = t.Skipped() }()
		Skip(t, "a probe of wine.Skip itself, not a real skip")
	})
	if skipped != underWine {
		t.Fatalf("skipped = %v, want %v (under Wine: %v)", skipped, underWine, underWine)
	}
}
