package notify_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/rbookhq/rbook-action/controlplane/notify"
	"github.com/rbookhq/rbook-action/controlplane/store"
)

var testSecret = "whsec_" + base64.StdEncoding.EncodeToString([]byte("notify-config-test-secret-0123456789"))

func testEnv(k string) (string, bool) {
	v, ok := map[string]string{"HOOK_SECRET": testSecret, "TEAMS_URL": "https://prod-00.westeurope.logic.azure.com/workflows/abc/triggers/manual/paths/invoke?sig=s3cr3t",
		"SMTP_PASSWORD": "pw", "EMPTY": " ", "SHORT": "whsec_cHc="}[k]
	return v, ok
}

// The example config parses, and routing takes the first matching route, else the default.
func TestRoutesPickTheFirstMatchThenTheDefault(t *testing.T) {
	data, err := os.ReadFile("testdata/notify.yaml")
	if err != nil {
		t.Fatal(err)
	}
	c, err := notify.ParseConfig(data, "testdata/notify.yaml", testEnv)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(c.Names, []string{"hooks", "ops-teams", "mail"}) || len(c.Routes) != 2 || c.Default == nil {
		t.Fatalf("config = %+v", c)
	}
	if esc := c.Routes[0].Escalate; len(esc) != 1 || esc[0].After != 30*time.Minute || !slices.Equal(esc[0].Channels, []string{"mail"}) ||
		!slices.Equal(esc[0].Notify, []string{"person:alice", "group:sre", "email:oncall@example.com"}) {
		t.Errorf("escalation = %+v", esc)
	}
	for _, tc := range []struct {
		kind string
		d    store.EventData
		want []string
	}{
		{store.EventGateOpened, store.EventData{Runbook: "deploy-web", Environment: "prod", Repository: "acme/web"}, []string{"ops-teams", "hooks"}},
		{store.EventGateOpened, store.EventData{Runbook: "deploy-web", Environment: "staging", Repository: "acme/web"}, []string{"hooks"}},
		{store.EventGateOpened, store.EventData{Runbook: "deploy-web", Environment: "prod"}, []string{"hooks"}}, // no repository: only "*" matches
		{store.EventVoteCast, store.EventData{Runbook: "deploy-web", Environment: "prod", Repository: "acme/web"}, []string{"hooks"}},
		{store.EventRunFailed, store.EventData{Runbook: "deploy-db"}, []string{"mail"}},
		{store.EventRunFailed, store.EventData{Runbook: "backup"}, []string{"hooks"}},
	} {
		if got := c.ChannelsFor(tc.kind, tc.d); !slices.Equal(got, tc.want) {
			t.Errorf("%s %+v → %v, want %v", tc.kind, tc.d, got, tc.want)
		}
	}
}

// Config mistakes name file:line and the field, and say what to do; secret values never
// appear in them.
func TestConfigErrorsNameFileLineAndField(t *testing.T) {
	hook := "channels:\n  - name: hooks\n    kind: webhook\n    url: https://h.example.com\n    secret_env: HOOK_SECRET\n"
	for _, tc := range []struct{ name, text, want string }{
		{"empty", "", "n.yaml: empty notification config"},
		{"syntax", "channels: [\n", "n.yaml:2: did not find expected node content"},
		{"unknown top field", hook + "rutes: []\n", `n.yaml:6: the config: unknown field "rutes"`},
		{"inline secret", "channels:\n  - name: h\n    kind: webhook\n    url: https://h.example.com\n    secret: whsec_abc\n",
			"n.yaml:5: channels[0].secret: secrets are not written in the config: use secret_env"},
		{"unset env", "channels:\n  - name: h\n    kind: webhook\n    url: https://h.example.com\n    secret_env: NOPE\ndefault: {channels: [h]}\n",
			"n.yaml:5: channels[0].secret_env: environment variable NOPE is not set or empty"},
		{"blank env", "channels:\n  - name: h\n    kind: webhook\n    url: https://h.example.com\n    secret_env: EMPTY\ndefault: {channels: [h]}\n",
			"n.yaml:5: channels[0].secret_env: environment variable EMPTY is not set or empty"},
		{"bad kind", "channels:\n  - name: h\n    kind: pager\n", `n.yaml:3: channels[0].kind: "pager": want webhook, teams, email or slack`},
		{"field of another kind", "channels:\n  - name: h\n    kind: teams\n    url: https://x.example.com\n",
			"n.yaml:4: channels[0].url: not a field of a teams channel (fields: url_env, url_file)"},
		{"bad url", "channels:\n  - name: h\n    kind: webhook\n    url: ftp://x\n    secret_env: HOOK_SECRET\n",
			`n.yaml:4: channels[0].url: "ftp://x" is not an http(s) URL`},
		{"bad name", "channels:\n  - name: Ops Hooks\n    kind: webhook\n", `n.yaml:2: channels[0].name: "Ops Hooks": use 1-64 of a-z 0-9 _ -`},
		{"duplicate channel", "channels:\n  - {name: h, kind: webhook, url: 'https://a.example.com', secret_env: HOOK_SECRET}\n  - {name: h, kind: webhook, url: 'https://a.example.com', secret_env: HOOK_SECRET}\n",
			`n.yaml:3: channels[1].name: channel "h" is defined twice`},
		{"undefined channel", hook + "routes:\n  - channels: [hooks, pager]\n", `n.yaml:7: channels: "pager" is not a defined channel (defined: hooks)`},
		{"unknown event", hook + "routes:\n  - events: [gate.open]\n    channels: [hooks]\n", `n.yaml:7: routes[0].events[0]: "gate.open" is not an event`},
		{"bad glob", hook + "routes:\n  - runbook: 'deploy-['\n    channels: [hooks]\n", `n.yaml:7: routes[0].runbook: "deploy-[" is not a glob`},
		{"route without channels", hook + "routes:\n  - runbook: x\n", "n.yaml:7: routes[0]: a route needs channels"},
		{"no routes", hook, "n.yaml:1: routes: no route and no default, so nothing would ever be sent"},
		{"escalation without channels", hook + "routes:\n  - channels: [hooks]\n    escalate: [{after: 30m}]\n",
			"n.yaml:8: routes[0].escalate[0]: an escalation step needs after (a duration) and channels"},
		{"escalation delay", hook + "routes:\n  - channels: [hooks]\n    escalate: [{after: soon, channels: [hooks]}]\n",
			`n.yaml:8: routes[0].escalate[0].after: "soon": want a duration such as 30m or 2h`},
		{"escalation order", hook + "routes:\n  - channels: [hooks]\n    escalate:\n      - {after: 1h, channels: [hooks]}\n      - {after: 30m, channels: [hooks]}\n",
			"n.yaml:10: routes[0].escalate[1].after: 30m0s is not after the previous step's 1h0m0s"},
		{"escalation channel", hook + "routes:\n  - channels: [hooks]\n    escalate:\n      - {after: 1h, channels: [pager]}\n",
			`n.yaml:9: channels: "pager" is not a defined channel (defined: hooks)`},
		{"escalation without gate.opened", hook + "routes:\n  - events: [run.failed]\n    channels: [hooks]\n    escalate: [{after: 1h, channels: [hooks]}]\n",
			"n.yaml:7: routes[0].escalate: the route does not send gate.opened"},
		{"escalation notify entry", hook + "routes:\n  - channels: [hooks]\n    escalate:\n      - {after: 1h, channels: [hooks], notify: ['github:carol']}\n",
			`n.yaml:9: routes[0].escalate[0].notify: "github:carol" is not "person:<id>", "group:<name>" or "email:<address>"`},
		{"escalation notify without email", hook + "routes:\n  - channels: [hooks]\n    escalate:\n      - {after: 1h, channels: [hooks], notify: ['person:alice']}\n",
			"n.yaml:9: routes[0].escalate[0].notify: the step has no email channel to mail person:alice: add an email channel to its channels"},
		{"short secret", "channels:\n  - name: h\n    kind: webhook\n    url: https://h.example.com\n    secret_env: SHORT\n",
			"n.yaml:5: channels[0]: the signing secret decodes to 2 bytes"},
		{"email address", "channels:\n  - name: m\n    kind: email\n    smtp: smtp.example.com:25\n    from: rbook\n    to: [a@example.com]\n",
			`n.yaml:5: channels[0].from: "rbook" is not an email address`},
		{"alias", "channels: &c\n  - name: h\n", "n.yaml:1: anchors and aliases are not allowed"},
		{"duplicate key", hook + "channels: []\n", "n.yaml:6: channels: given twice"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := notify.ParseConfig([]byte(tc.text), "n.yaml", testEnv)
			if err == nil || !strings.HasPrefix(err.Error(), tc.want) {
				t.Fatalf("error = %v\nwant prefix %s", err, tc.want)
			}
			if strings.Contains(err.Error(), testSecret) || strings.Contains(err.Error(), "s3cr3t") {
				t.Fatalf("error leaks a secret: %v", err)
			}
		})
	}
}

// The Teams channel posts an Adaptive Card with the gate's facts and a button to its page;
// a 4xx from the workflow is a permanent refusal whose error does not name the URL (it
// carries the workflow's signature).
func TestTeamsCardLinksTheGate(t *testing.T) {
	var got map[string]any
	status := http.StatusAccepted
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		if err := json.Unmarshal(b, &got); err != nil || r.Header.Get("Content-Type") != "application/json" {
			t.Errorf("body %s: %v", b, err)
		}
		w.WriteHeader(status)
	}))
	defer srv.Close()
	c, err := notify.ParseConfig([]byte("channels:\n  - name: t\n    kind: teams\n    url_env: URL\ndefault: {channels: [t]}\n"), "n.yaml",
		func(string) (string, bool) { return srv.URL + "/workflows/x?sig=s3cr3t", true })
	if err != nil {
		t.Fatal(err)
	}
	m := notify.Message{ID: "gate.opened:ap-1", Kind: store.EventGateOpened, At: time.Now(), Data: store.EventData{RunID: "R1", Runbook: "deploy-web",
		Gate: &store.GateData{ApprovalID: "ap-1", Node: "approve", Prompt: "Ship it?", ApprovalsRequired: 2, ApprovalURL: "https://rbook.example.com/approvals/ap-1"}}}
	if _, err := c.Channels["t"].Send(context.Background(), m); err != nil {
		t.Fatal(err)
	}
	att := got["attachments"].([]any)[0].(map[string]any)
	card := att["content"].(map[string]any)
	action := card["actions"].([]any)[0].(map[string]any)
	title := card["body"].([]any)[0].(map[string]any)["text"]
	if got["type"] != "message" || att["contentType"] != "application/vnd.microsoft.card.adaptive" || card["type"] != "AdaptiveCard" ||
		action["type"] != "Action.OpenUrl" || action["url"] != "https://rbook.example.com/approvals/ap-1" || title != "Approval needed: approve (deploy-web)" {
		t.Errorf("card = %v", got)
	}
	status = http.StatusBadRequest
	_, err = c.Channels["t"].Send(context.Background(), m)
	if !notify.IsPermanent(err) || strings.Contains(err.Error(), "s3cr3t") {
		t.Errorf("400 from the workflow = %v (permanent %v)", err, notify.IsPermanent(err))
	}
}
