package serveconfig

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/spf13/pflag"

	"github.com/rbookhq/rbook-action/controlplane/ghapp"
	"github.com/rbookhq/rbook-action/controlplane/server"
	"github.com/rbookhq/rbook-action/controlplane/webhook"
)

// githubFlags are rbook serve's GitHub App flags (docs/approvals.md, "GitHub App webhook").
type githubFlags struct {
	appID               int64
	keyFile, secretFile string
	apiURL              string
}

// Caps on the GitHub App's files: a PEM RSA key is a few KiB, a webhook secret a few dozen
// bytes; anything larger is the wrong file.
const (
	maxAppKeyFileBytes    = 64 << 10
	maxWebhookSecretBytes = 4 << 10
)

// add registers --github-app-id, --github-app-key, --github-webhook-secret-file and
// --github-api-url on fs.
func (g *githubFlags) add(fs *pflag.FlagSet) {
	fs.Int64Var(&g.appID, "github-app-id", 0, "GitHub App id: take part in environment protection and serve its webhook at "+webhook.Path)
	fs.StringVar(&g.keyFile, "github-app-key", "", "file with the GitHub App's private key (PEM, as GitHub issues it)")
	fs.StringVar(&g.secretFile, "github-webhook-secret-file", "", "file with the GitHub App's webhook secret (at least 16 bytes; surrounding whitespace ignored); while rotating it, two lines: the new secret, then the previous one")
	fs.StringVar(&g.apiURL, "github-api-url", ghapp.DefaultAPIURL, "GitHub REST API base URL (GitHub Enterprise Server: https://HOST/api/v3)")
}

// apply checks the GitHub App flags (all of --github-app-id, --github-app-key and
// --github-webhook-secret-file, or none; --github-api-url only with them), reads the key and
// secret files and sets cfg.GitHub. It returns the words for the listening line ("" without
// an App). Errors name the flag or the file; they never hold the files' contents.
func (g *githubFlags) apply(fs *pflag.FlagSet, cfg *server.Config) (string, error) {
	set := map[string]bool{}
	for _, n := range []string{"github-app-id", "github-app-key", "github-webhook-secret-file", "github-api-url"} {
		set[n] = fs.Changed(n)
	}
	if !set["github-app-id"] && !set["github-app-key"] && !set["github-webhook-secret-file"] {
		if set["github-api-url"] {
			return "", fmt.Errorf("--github-api-url needs --github-app-id, --github-app-key and --github-webhook-secret-file")
		}
		return "", nil
	}
	var missing []string
	for _, n := range []string{"github-app-id", "github-app-key", "github-webhook-secret-file"} {
		if !set[n] {
			missing = append(missing, "--"+n)
		}
	}
	if len(missing) > 0 {
		return "", fmt.Errorf("the GitHub App needs --github-app-id, --github-app-key and --github-webhook-secret-file together; missing %s", strings.Join(missing, ", "))
	}
	if g.appID <= 0 {
		return "", fmt.Errorf("--github-app-id %d: must be the App's positive numeric id", g.appID)
	}
	key, err := readSecretFile(g.keyFile, maxAppKeyFileBytes)
	if err != nil {
		return "", fmt.Errorf("--github-app-key %s: %v", g.keyFile, err)
	}
	app, err := ghapp.New(ghapp.Config{AppID: g.appID, PrivateKeyPEM: key, APIURL: g.apiURL})
	if err != nil {
		if strings.Contains(err.Error(), "API URL") {
			return "", fmt.Errorf("--github-api-url: %v", err)
		}
		return "", fmt.Errorf("--github-app-key %s: %v", g.keyFile, err)
	}
	secret, err := readSecretFile(g.secretFile, maxWebhookSecretBytes)
	if err != nil {
		return "", fmt.Errorf("--github-webhook-secret-file %s: %v", g.secretFile, err)
	}
	secrets, err := webhookSecrets(secret)
	if err != nil {
		return "", fmt.Errorf("--github-webhook-secret-file %s: %v", g.secretFile, err)
	}
	cfg.GitHub = &server.GitHubOptions{App: app, WebhookSecret: secrets[0]}
	if len(secrets) == 2 {
		cfg.GitHub.PreviousWebhookSecret = secrets[1]
	}
	return fmt.Sprintf("GitHub App %d at %s, webhook %s", g.appID, strings.TrimRight(g.apiURL, "/"), webhook.Path), nil
}

// webhookSecrets splits a webhook secret file: one secret, or two lines during a rotation,
// the current secret first and the previous one second (docs/tls.md, "Rotating the GitHub
// webhook secret"); blank lines and surrounding whitespace are ignored. Errors: more than two
// secrets, a secret shorter than webhook.MinSecretBytes (by its line, never its value).
func webhookSecrets(b []byte) ([][]byte, error) {
	var out [][]byte
	var lines []int
	for i, line := range bytes.Split(b, []byte("\n")) {
		if line = bytes.TrimSpace(line); len(line) > 0 {
			out, lines = append(out, line), append(lines, i+1)
		}
	}
	if len(out) > 2 {
		return nil, fmt.Errorf("line %d: the file holds at most two secrets, one per line: the current one, then the previous one while a rotation is under way", lines[2])
	}
	for i, sec := range out {
		if len(sec) >= webhook.MinSecretBytes {
			continue
		}
		where := ""
		if len(out) > 1 {
			where = fmt.Sprintf("line %d: ", lines[i])
		}
		return nil, fmt.Errorf("%sthe secret is %d bytes, need at least %d", where, len(sec), webhook.MinSecretBytes)
	}
	return out, nil // readSecretFile refused an empty file
}

// readSecretFile reads at most limit bytes of path; a larger or empty file is an error.
func readSecretFile(path string, limit int64) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, err
	}
	if int64(len(b)) > limit {
		return nil, fmt.Errorf("file is over %d bytes: is it the right file?", limit)
	}
	if len(bytes.TrimSpace(b)) == 0 {
		return nil, fmt.Errorf("file is empty")
	}
	return b, nil
}
