// Package lazyregexp holds package-level regular expressions that are compiled the first time
// they are used, not when the program starts. Every rbook command links every package, so a
// pattern compiled at package initialisation costs `rbook --help` and `rbook version` too;
// counted repetitions such as `{1,256}` compile to hundreds of program instructions and
// hundreds of kilobytes (docs/development.md, "Start-up time": scripts/startup-time.sh measures it).
//
// It may be imported by every package (it imports only the standard library). A pattern that
// does not compile panics where it is first used; in a test binary it is compiled in New, so
// any test of the package that declares it finds the mistake.
package lazyregexp

import (
	"os"
	"regexp"
	"strings"
	"sync"
)

// Regexp is a regular expression compiled on first use; its methods are those of
// regexp.Regexp with the same name. Safe for concurrent use.
type Regexp struct {
	expr string
	re   func() *regexp.Regexp
}

// inTest reports whether this process is a `go test` binary (its name ends in ".test").
var inTest = len(os.Args) > 0 && strings.HasSuffix(strings.TrimSuffix(os.Args[0], ".exe"), ".test")

// New returns expr as a Regexp that compiles on first use (regexp.MustCompile: a pattern
// that does not compile panics then). In a test binary it compiles at once.
func New(expr string) *Regexp {
	r := lazy(expr)
	if inTest {
		r.re()
	}
	return r
}

// lazy is New without the test binary's early compile.
func lazy(expr string) *Regexp {
	return &Regexp{expr: expr, re: sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(expr) })}
}

// Regexp returns the compiled expression, compiling it if this is the first use.
func (r *Regexp) Regexp() *regexp.Regexp { return r.re() }

// String returns the source text of the expression without compiling it.
func (r *Regexp) String() string { return r.expr }

// MatchString is regexp.Regexp.MatchString.
func (r *Regexp) MatchString(s string) bool { return r.re().MatchString(s) }

// FindStringSubmatch is regexp.Regexp.FindStringSubmatch.
func (r *Regexp) FindStringSubmatch(s string) []string { return r.re().FindStringSubmatch(s) }

// FindAllStringSubmatchIndex is regexp.Regexp.FindAllStringSubmatchIndex.
func (r *Regexp) FindAllStringSubmatchIndex(s string, n int) [][]int {
	return r.re().FindAllStringSubmatchIndex(s, n)
}

// ReplaceAllString is regexp.Regexp.ReplaceAllString.
func (r *Regexp) ReplaceAllString(src, repl string) string {
	return r.re().ReplaceAllString(src, repl)
}

// ReplaceAllStringFunc is regexp.Regexp.ReplaceAllStringFunc.
func (r *Regexp) ReplaceAllStringFunc(src string, repl func(string) string) string {
	return r.re().ReplaceAllStringFunc(src, repl)
}
