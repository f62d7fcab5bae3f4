package main

import (
	"os"
	"path/filepath"
	"regexp"
	"testing"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// everyCommand lists the command tree below root, without cobra's own help and completion.
func everyCommand(root *cobra.Command) []*cobra.Command {
	var out []*cobra.Command
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		for _, sub := range c.Commands() {
			if sub.Name() == "help" || sub.Name() == "completion" {
				continue
			}
			out = append(out, sub)
			walk(sub)
		}
	}
	walk(root)
	return out
}

// portRE finds host:port pairs and :port suffixes of URLs in text.
var portRE = regexp.MustCompile(`(?:127\.0\.0\.1|localhost|0\.0\.0\.0|\[::1\]):(\d+)`)

// TestOneDefaultPort: the README and docs/, the clients' docs and messages, the example
// workflows and every --help name the same port, rbook serve's default.
func TestOneDefaultPort(t *testing.T) {
	if defaultServeAddr != "127.0.0.1:7070" {
		t.Fatalf("defaultServeAddr = %s", defaultServeAddr)
	}
	texts := map[string]string{}
	for _, f := range []string{"README.md", "docs/action.md", "docs/approvals.md", "docs/cli.md", "docs/control-plane.md",
		"docs/development.md", "docs/playbooks.md", "docs/runbooks.md", "clients/ts/README.md", "clients/ts/smoke.ts", "tools/README.md"} {
		texts[f] = repoFile(t, f)
	}
	workflows, _ := filepath.Glob(filepath.Join("..", "..", "examples", "workflows", "*.yml"))
	for _, f := range workflows {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		texts[f] = string(b)
	}
	for _, c := range append(everyCommand(newRootCmd()), newRootCmd()) {
		help := c.Long + "\n" + c.Example
		c.Flags().VisitAll(func(f *pflag.Flag) { help += "\n" + f.Usage + " " + f.DefValue })
		texts[c.CommandPath()+" --help"] = help
	}
	seen := 0
	for where, text := range texts {
		for _, m := range portRE.FindAllStringSubmatch(text, -1) {
			seen++
			if m[1] != defaultServePort {
				t.Errorf("%s names %s; the one default port is %s (rbook serve --addr)", where, m[0], defaultServePort)
			}
		}
	}
	if seen < 5 {
		t.Fatalf("only %d addresses found; is the scan reading the files?", seen)
	}
}
