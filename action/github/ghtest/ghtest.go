// Package ghtest plays the GitHub runner's side of rbook's runner output for tests (docs/action.md, "Runner-native output"): the runner's workflow-command processing over a job log, and GitHub's grammar of
// file commands ($GITHUB_OUTPUT, $GITHUB_STATE). Only tests import it.
package ghtest

import (
	"fmt"
	"regexp"
	"strings"
)

// v1Command is the older "##[name props]message" form, which the runner honours anywhere in a
// line.
var v1Command = regexp.MustCompile(`##\[([^\]]*)\](.*)`)

// ActedCommands plays the runner's command processing (actions/runner ActionCommandManager)
// over a job log: a line whose trimmed start is "::name props::message" (v2), or that holds
// "##[name props]message" (v1), is a command; while stop-commands is on only "::<token>::"
// acts, and it turns commands back on. It returns the commands that acted, each as
// "name props::message", and the 0-based log line of each.
func ActedCommands(log string) (acted []string, at []int) {
	stop := ""
	for n, line := range strings.Split(log, "\n") {
		l := strings.TrimLeft(line, " \t")
		head, msg, ok := "", "", false
		if rest, isV2 := strings.CutPrefix(l, "::"); isV2 {
			head, msg, ok = strings.Cut(rest, "::")
		} else if m := v1Command.FindStringSubmatch(l); m != nil {
			head, msg, ok = m[1], m[2], true
		}
		if !ok {
			continue
		}
		name := strings.SplitN(head, " ", 2)[0]
		if stop != "" {
			if name == stop {
				stop = ""
			}
			continue
		}
		if name == "stop-commands" {
			stop = msg
			continue
		}
		acted, at = append(acted, head+"::"+msg), append(at, n)
	}
	return acted, at
}

// ParseFileCommands reads a file-command file ($GITHUB_OUTPUT, $GITHUB_STATE) with GitHub's
// grammar: "name=value" lines and "name<<DELIM" … "DELIM" blocks. It returns name → value, or
// an error naming the first line that is neither, or a block without its closing delimiter.
func ParseFileCommands(text string) (map[string]string, error) {
	out := map[string]string{}
	lines := strings.Split(strings.TrimSuffix(text, "\n"), "\n")
	for i := 0; i < len(lines); i++ {
		if name, delim, ok := strings.Cut(lines[i], "<<"); ok && !strings.Contains(name, "=") {
			var val []string
			for i++; i < len(lines) && lines[i] != delim; i++ {
				val = append(val, lines[i])
			}
			if i == len(lines) {
				return nil, fmt.Errorf("file command %s: no closing %q", name, delim)
			}
			out[name] = strings.Join(val, "\n")
			continue
		}
		name, val, ok := strings.Cut(lines[i], "=")
		if !ok {
			return nil, fmt.Errorf("line %d %q is no file command", i+1, lines[i])
		}
		out[name] = val
	}
	return out, nil
}
