package lazyregexp

import (
	"regexp"
	"slices"
	"strings"
	"testing"
)

func TestMethodsAgreeWithRegexp(t *testing.T) {
	const expr = `([a-z]+)-([0-9]+)`
	const in = "ab-12 cd-3 x"
	l, re := lazy(expr), regexp.MustCompile(expr)
	if got, want := l.MatchString(in), re.MatchString(in); got != want {
		t.Errorf("MatchString = %v, want %v", got, want)
	}
	if got, want := l.FindStringSubmatch(in), re.FindStringSubmatch(in); !slices.Equal(got, want) {
		t.Errorf("FindStringSubmatch = %q, want %q", got, want)
	}
	if got, want := l.FindAllStringSubmatchIndex(in, -1), re.FindAllStringSubmatchIndex(in, -1); !slices.EqualFunc(got, want, slices.Equal) {
		t.Errorf("FindAllStringSubmatchIndex = %v, want %v", got, want)
	}
	if got := l.ReplaceAllString(in, "$2"); got != "12 3 x" {
		t.Errorf("ReplaceAllString = %q, want %q", got, "12 3 x")
	}
	if got := l.ReplaceAllStringFunc(in, strings.ToUpper); got != "AB-12 CD-3 x" {
		t.Errorf("ReplaceAllStringFunc = %q, want %q", got, "AB-12 CD-3 x")
	}
	if l.String() != expr || l.Regexp().String() != expr {
		t.Errorf("String = %q, Regexp().String() = %q, want %q", l.String(), l.Regexp().String(), expr)
	}
}

func TestPatternCompilesOnFirstUseNotBefore(t *testing.T) {
	l := lazy(`(unclosed`) // would panic in regexp.MustCompile
	if l.String() != `(unclosed` {
		t.Fatalf("String = %q", l.String())
	}
	defer func() {
		if recover() == nil {
			t.Error("the first use of an invalid pattern did not panic")
		}
	}()
	l.MatchString("x")
}

func TestNewCompilesAtOnceInATestBinary(t *testing.T) {
	if !inTest {
		t.Fatal("inTest is false in a test binary")
	}
	defer func() {
		if recover() == nil {
			t.Error("New of an invalid pattern did not panic in a test binary")
		}
	}()
	New(`(unclosed`)
}
