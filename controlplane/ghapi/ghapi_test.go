package ghapi_test

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/rbookhq/rbook-action/controlplane/ghapi"
)

func sign(body, secret []byte) string {
	m := hmac.New(sha256.New, secret)
	m.Write(body)
	return "sha256=" + hex.EncodeToString(m.Sum(nil))
}

// A signature is accepted only when it is the body's HMAC-SHA256 with the secret, written
// as GitHub writes it (sha256= and 64 hex digits).
func TestValidateSignatureAcceptsOnlyTheBodysHMAC(t *testing.T) {
	body, secret := []byte(`{"action":"approved"}`), []byte("0123456789abcdef")
	good := sign(body, secret)
	for _, c := range []struct {
		name, sig string
		body      []byte
		ok        bool
	}{
		{"exact", good, body, true},
		{"other body", good, []byte(`{"action":"rejected"}`), false},
		{"other secret", sign(body, []byte("fedcba9876543210")), body, false},
		{"sha1 prefix", "sha1=" + strings.TrimPrefix(good, "sha256="), body, false},
		{"not hex", "sha256=" + strings.Repeat("z", 64), body, false},
		{"short", good[:len(good)-2], body, false},
		{"empty", "", body, false},
	} {
		err := ghapi.ValidateSignature(c.sig, c.body, secret)
		if (err == nil) != c.ok {
			t.Errorf("%s: err %v, want ok=%v", c.name, err, c.ok)
		}
		if err != nil && strings.Contains(err.Error(), string(secret)) {
			t.Errorf("%s: error %q holds the secret", c.name, err)
		}
	}
}

// The run id is read from a deployment_callback_url of GitHub's shape only.
func TestProtectionRuleRunIDFromCallbackURL(t *testing.T) {
	for _, c := range []struct {
		url  string
		want int64
	}{
		{"https://api.github.com/repos/acme/deploys/actions/runs/123456789/deployment_protection_rule", 123456789},
		{"https://ghe.example.com/api/v3/repos/acme/deploys/actions/runs/42/deployment_protection_rule", 42},
		{"https://api.github.com/repos/acme/deploys/actions/runs/42/approvals", -1},
		{"https://api.github.com/repos/acme/deploys/actions/runs/x/deployment_protection_rule", -1},
		{"https://api.github.com/repos/acme/deploys/actions/runs/0/deployment_protection_rule", -1},
		{"https://api.github.com/actions/runs/42/deployment_protection_rule", -1},
		{"", -1},
	} {
		ev := &ghapi.DeploymentProtectionRuleEvent{DeploymentCallbackURL: c.url}
		got, err := ev.GetRunID()
		if got != c.want || (err == nil) != (c.want > 0) {
			t.Errorf("GetRunID(%q) = %d, %v; want %d", c.url, got, err, c.want)
		}
	}
}

// Getters on absent objects give zero values, so a payload GitHub's schema allows to omit
// them is read without a nil check at each step.
func TestGettersOnAbsentObjectsAreZero(t *testing.T) {
	var ev *ghapi.DeploymentReviewEvent
	if ev.GetApprover().GetLogin() != "" || ev.GetWorkflowRun().GetID() != 0 || ev.GetWorkflowRun().GetRunAttempt() != 0 ||
		ev.GetRepo().GetFullName() != "" || ev.GetWorkflowJobRun().GetHTMLURL() != "" || ev.GetInstallation().GetID() != 0 {
		t.Fatal("a nil review's getters are not zero")
	}
	var rule ghapi.DeploymentProtectionRuleEvent
	if rule.GetDeployment().GetEnvironment() != "" || rule.GetDeployment().GetID() != 0 {
		t.Fatal("an absent deployment's getters are not zero")
	}
}

// A request carries the API version, JSON and the credential; a 2xx answer is decoded, any
// other status is an *ErrorResponse with GitHub's message and the response, and the
// Link header's next page is read.
func TestClientSendsJSONAndReportsGitHubsError(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "token t0k" || r.Header.Get("X-GitHub-Api-Version") != ghapi.APIVersion {
			http.Error(w, `{"message":"Bad credentials"}`, http.StatusUnauthorized)
			return
		}
		switch r.URL.Path {
		case "/api/v3/user":
			w.Header().Set("Link", `<https://x/user/teams?per_page=100&page=3>; rel="next", <https://x/user/teams?page=9>; rel="last"`)
			_, _ = io.WriteString(w, `{"login":"octo","id":7,"name":"Octo Cat","plan":{"name":"free"}}`)
		case "/api/v3/echo":
			b, _ := io.ReadAll(r.Body)
			w.WriteHeader(http.StatusCreated)
			_, _ = w.Write(b)
		default:
			w.WriteHeader(http.StatusNotFound)
			_, _ = io.WriteString(w, `{"message":"Not Found","documentation_url":"https://docs.github.com/rest"}`)
		}
	}))
	defer srv.Close()
	c, err := ghapi.NewClient(srv.URL+"/api/v3", srv.Client(), func(context.Context) (string, error) { return "token t0k", nil })
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	var u ghapi.User
	resp, err := c.Do(ctx, http.MethodGet, "user", nil, &u)
	if err != nil || u.Login != "octo" || u.ID != 7 || u.Name != "Octo Cat" || ghapi.NextPage(resp) != 3 {
		t.Fatalf("GET user: %+v, %v, next page %d", u, err, ghapi.NextPage(resp))
	}
	var echo map[string]string
	if _, err := c.Do(ctx, http.MethodPost, "echo", map[string]string{"comment": "a <b> & c"}, &echo); err != nil || echo["comment"] != "a <b> & c" {
		t.Fatalf("POST echo: %v, %v", echo, err)
	}
	resp, err = c.Do(ctx, http.MethodGet, "repos/acme/gone", nil, nil)
	var ge *ghapi.ErrorResponse
	if !errors.As(err, &ge) || ge.StatusCode != http.StatusNotFound || ge.Message != "Not Found" || resp == nil || resp.StatusCode != 404 ||
		!strings.Contains(err.Error(), "GET "+srv.URL+"/api/v3/repos/acme/gone: 404 Not Found") {
		t.Fatalf("GET missing: %v (%#v)", err, ge)
	}
	if _, err := ghapi.NewClient("api.github.com", nil, nil); err == nil {
		t.Fatal("a relative API URL was accepted")
	}
}
