package procgroup

import (
	"os"
	"slices"
	"strings"
)

// withheldWords are the words that make an RBOOK_ variable one of rbook's credentials
// (Withheld): the control plane's token, the approval and webhook secrets, the signing key,
// the client key, the identity providers' secrets.
var withheldWords = []string{"TOKEN", "SECRET", "KEY", "PASSWORD"}

// withheldNames are the other credentials rbook holds: the control plane's database address
// (it may carry a password), and the token the runner hands the Action itself (cache and
// artifact access; the job's own `run:` steps never get it).
var withheldNames = []string{"RBOOK_DB", "ACTIONS_RUNTIME_TOKEN"}

// Withheld reports whether the environment variable name is one of rbook's own credentials,
// which a process rbook starts (a stdio MCP server, a playbook node's command) does not
// inherit: a name that starts "RBOOK_" and contains TOKEN, SECRET, KEY or PASSWORD, or one of
// withheldNames, compared upper-cased (Windows names are case-insensitive). The rule, what it
// leaves to the job (ACTIONS_ID_TOKEN_REQUEST_*), and how to hand a process a credential on
// purpose (its env entry) are in docs/decisions/mcp-config.md, "Environment".
func Withheld(name string) bool {
	up := strings.ToUpper(name)
	if slices.Contains(withheldNames, up) {
		return true
	}
	if !strings.HasPrefix(up, "RBOOK_") {
		return false
	}
	for _, w := range withheldWords {
		if strings.Contains(up[len("RBOOK_"):], w) {
			return true
		}
	}
	return false
}

// Environ is os.Environ() ("K=V" entries, in its order) without the variables Withheld
// names: the base environment of every process rbook starts.
func Environ() []string {
	env := os.Environ()
	kept := env[:0]
	for _, kv := range env {
		name, _, _ := strings.Cut(kv, "=")
		if name != "" && Withheld(name) {
			continue
		}
		kept = append(kept, kv)
	}
	return kept
}
