package webhook_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/rbookhq/rbook-action/controlplane/ghapi"
	"github.com/rbookhq/rbook-action/controlplane/store"
	"github.com/rbookhq/rbook-action/controlplane/webhook"
	"github.com/rbookhq/rbook-action/controlplane/webhook/ghfake"
)

var testWebhookSecret = []byte("webhook-secret-0123456789abcdef")

// recorder is a webhook.Handler that remembers what it was given and can be made to fail.
type recorder struct {
	mu      sync.Mutex
	rules   []*ghapi.DeploymentProtectionRuleEvent
	reviews []*ghapi.DeploymentReviewEvent
	ids     []string
	fail    int   // fail the next fail calls
	failErr error // what they fail with (nil: a storage-like error)
}

func (r *recorder) next(id string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.ids = append(r.ids, id)
	if r.fail > 0 {
		r.fail--
		if r.failErr != nil {
			return r.failErr
		}
		return errors.New("binding store unavailable")
	}
	return nil
}

func (r *recorder) ProtectionRuleRequested(_ context.Context, d webhook.Delivery, ev *ghapi.DeploymentProtectionRuleEvent) error {
	if err := r.next(d.ID); err != nil {
		return err
	}
	r.mu.Lock()
	r.rules = append(r.rules, ev)
	r.mu.Unlock()
	return nil
}

func (r *recorder) DeploymentReviewed(_ context.Context, d webhook.Delivery, ev *ghapi.DeploymentReviewEvent) error {
	if err := r.next(d.ID); err != nil {
		return err
	}
	r.mu.Lock()
	r.reviews = append(r.reviews, ev)
	r.mu.Unlock()
	return nil
}

func (r *recorder) calls() int { r.mu.Lock(); defer r.mu.Unlock(); return len(r.ids) }

type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}
func (l *lockedBuffer) String() string { l.mu.Lock(); defer l.mu.Unlock(); return l.b.String() }

type fixture struct {
	st  *store.Store
	h   *recorder
	srv *httptest.Server
	log *lockedBuffer
}

func newFixture(t *testing.T, opts ...webhook.Option) *fixture {
	t.Helper()
	st, err := store.Open(context.Background(), filepath.Join(t.TempDir(), "cp.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	f := &fixture{st: st, h: &recorder{}, log: &lockedBuffer{}}
	ep, err := webhook.New(testWebhookSecret, st, f.h, slog.New(slog.NewTextHandler(f.log, nil)), opts...)
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.Handle(webhook.Path, ep)
	f.srv = httptest.NewServer(mux)
	t.Cleanup(f.srv.Close)
	return f
}

func (f *fixture) post(t *testing.T, d ghfake.Delivery, secret []byte, edit func(*http.Request)) int {
	t.Helper()
	req, err := d.Request(f.srv.URL+webhook.Path, secret)
	if err != nil {
		t.Fatal(err)
	}
	if edit != nil {
		edit(req)
	}
	resp, err := f.srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

func (f *fixture) seen(t *testing.T, id string) bool {
	t.Helper()
	ok, err := f.st.GitHubDeliverySeen(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	return ok
}

var repo = ghfake.Repository{Owner: "acme", Name: "deploys", ID: 4242}

func approved() ghfake.Delivery {
	return ghfake.DeploymentReview(ghfake.Review{Action: "approved", Repo: repo, InstallationID: 77, RunID: 9001,
		ApproverLogin: "octo-lead", ApproverID: 31337, Comment: "ship it",
		JobRuns: []ghfake.JobRun{{ID: 5, Name: "deploy", Environment: "production"}}})
}

// A bad signature is 401, the handler is not called, nothing is recorded,
// and the refusal is logged without the secret or the body.
func TestBadSignatureRefused(t *testing.T) {
	f := newFixture(t)
	d := approved()
	for _, c := range []struct {
		name   string
		secret []byte
		edit   func(*http.Request)
	}{
		{"wrong secret", []byte("not-the-webhook-secret-at-all!!"), nil},
		{"no signature", testWebhookSecret, func(r *http.Request) { r.Header.Del("X-Hub-Signature-256") }},
		{"sha1 signature", testWebhookSecret, func(r *http.Request) {
			r.Header.Set("X-Hub-Signature-256", "sha1="+strings.TrimPrefix(r.Header.Get("X-Hub-Signature-256"), "sha256="))
		}},
	} {
		if code := f.post(t, d, c.secret, c.edit); code != http.StatusUnauthorized {
			t.Fatalf("%s: status %d, want 401", c.name, code)
		}
	}
	if f.h.calls() != 0 || f.seen(t, d.ID) {
		t.Fatalf("after refusals: handler calls %d, recorded %v; want 0, false", f.h.calls(), f.seen(t, d.ID))
	}
	logs := f.log.String()
	if !strings.Contains(logs, "signature does not match") || !strings.Contains(logs, d.ID) || !strings.Contains(logs, "event=deployment_review") {
		t.Fatalf("refusal log lacks reason, delivery id or event:\n%s", logs)
	}
	for _, leak := range []string{string(testWebhookSecret), "ship it", "octo-lead", ghfake.Sign(testWebhookSecret, d.Body)} {
		if strings.Contains(logs, leak) {
			t.Fatalf("log holds %q:\n%s", leak, logs)
		}
	}
}

// While the webhook secret is rotated, a delivery signed with the current or the previous
// secret is accepted, and one signed with neither is refused.
func TestDeliverySignedWithThePreviousSecretVerifiesDuringARotation(t *testing.T) {
	previous := []byte("previous-webhook-secret-0123456789")
	f := newFixture(t, webhook.WithPreviousSecret(previous))
	for _, c := range []struct {
		name   string
		secret []byte
		want   int
	}{
		{"current secret", testWebhookSecret, http.StatusOK},
		{"previous secret", previous, http.StatusOK},
		{"another secret", []byte("not-the-webhook-secret-at-all!!"), http.StatusUnauthorized},
	} {
		d := approved()
		d.ID = "delivery-" + strings.ReplaceAll(c.name, " ", "-")
		if code := f.post(t, d, c.secret, nil); code != c.want {
			t.Fatalf("%s: status %d, want %d", c.name, code, c.want)
		}
	}
	if f.h.calls() != 2 {
		t.Fatalf("handler calls %d, want 2 (the current and the previous secret's deliveries)", f.h.calls())
	}
}

// A replayed delivery id is 200 and the handler runs once.
func TestReplayedDeliveryProcessedOnce(t *testing.T) {
	f := newFixture(t)
	d := approved()
	for i := range 3 {
		if code := f.post(t, d, testWebhookSecret, nil); code != http.StatusOK {
			t.Fatalf("delivery %d: status %d, want 200", i+1, code)
		}
	}
	if f.h.calls() != 1 || len(f.h.reviews) != 1 {
		t.Fatalf("handler calls %d, want 1", f.h.calls())
	}
	ev := f.h.reviews[0]
	if ev.GetApprover().GetLogin() != "octo-lead" || ev.GetApprover().GetID() != 31337 || ev.GetComment() != "ship it" ||
		ev.GetWorkflowRun().GetID() != 9001 || ev.GetRepo().GetFullName() != "acme/deploys" || ev.GetInstallation().GetID() != 77 ||
		len(ev.WorkflowJobRuns) != 1 || ev.WorkflowJobRuns[0].GetEnvironment() != "production" {
		t.Fatalf("parsed review = approver %q/%d comment %q run %d repo %q inst %d jobs %v",
			ev.GetApprover().GetLogin(), ev.GetApprover().GetID(), ev.GetComment(), ev.GetWorkflowRun().GetID(),
			ev.GetRepo().GetFullName(), ev.GetInstallation().GetID(), ev.WorkflowJobRuns)
	}
	if !f.seen(t, d.ID) || !strings.Contains(f.log.String(), "delivery already processed") {
		t.Fatalf("delivery not recorded or replay not logged:\n%s", f.log.String())
	}

	// Concurrent copies of one new delivery also run the handler once.
	d2 := approved()
	var wg sync.WaitGroup
	codes := make([]int, 4)
	for i := range codes {
		wg.Go(func() { codes[i] = f.post(t, d2, testWebhookSecret, nil) })
	}
	wg.Wait()
	for i, c := range codes {
		if c != http.StatusOK {
			t.Fatalf("concurrent copy %d: status %d", i, c)
		}
	}
	if f.h.calls() != 2 {
		t.Fatalf("after 4 concurrent copies of a second delivery: handler calls %d, want 2", f.h.calls())
	}
}

// An unknown event (and ping) is acknowledged with 200, ignored, not recorded.
func TestUnknownEventIgnored(t *testing.T) {
	f := newFixture(t)
	for _, ev := range []string{"ping", "push", "installation"} {
		d := ghfake.Delivery{Event: ev, ID: ghfake.NewDeliveryID(), Body: []byte(`{"zen":"Keep it logically awesome.","hook_id":1}`)}
		if code := f.post(t, d, testWebhookSecret, nil); code != http.StatusOK {
			t.Fatalf("%s: status %d, want 200", ev, code)
		}
		if f.seen(t, d.ID) {
			t.Fatalf("%s: recorded as processed", ev)
		}
	}
	if f.h.calls() != 0 || !strings.Contains(f.log.String(), "event not handled") {
		t.Fatalf("handler calls %d (want 0) or no log:\n%s", f.h.calls(), f.log.String())
	}
	// Even an unknown event must be signed.
	d := ghfake.Delivery{Event: "push", ID: ghfake.NewDeliveryID(), Body: []byte(`{}`)}
	if code := f.post(t, d, []byte("wrong-secret-wrong-secret-wrong"), nil); code != http.StatusUnauthorized {
		t.Fatalf("unsigned unknown event: status %d, want 401", code)
	}
}

// A body over MaxBodyBytes is refused with 413; one at the cap is read.
func TestOversizedBodyRefused(t *testing.T) {
	f := newFixture(t)
	pad := func(n int) []byte {
		b := []byte(`{"action":"ping","pad":"`)
		b = append(b, bytes.Repeat([]byte("x"), n-len(b)-2)...)
		return append(b, '"', '}')
	}
	big := ghfake.Delivery{Event: "deployment_review", ID: ghfake.NewDeliveryID(), Body: pad(webhook.MaxBodyBytes + 1)}
	if code := f.post(t, big, testWebhookSecret, nil); code != http.StatusRequestEntityTooLarge {
		t.Fatalf("body of %d bytes: status %d, want 413", len(big.Body), code)
	}
	if f.seen(t, big.ID) || !strings.Contains(f.log.String(), "body over 1048576 bytes") {
		t.Fatalf("oversized body recorded or not logged:\n%s", f.log.String())
	}
	atCap := ghfake.Delivery{Event: "deployment_review", ID: ghfake.NewDeliveryID(), Body: pad(webhook.MaxBodyBytes)}
	if code := f.post(t, atCap, testWebhookSecret, nil); code != http.StatusOK {
		t.Fatalf("body of exactly %d bytes: status %d, want 200", len(atCap.Body), code)
	}
}

// Missing event or delivery headers, a non-JSON content type and GET are refused.
func TestMissingHeadersRefused(t *testing.T) {
	f := newFixture(t)
	d := approved()
	cases := []struct {
		name string
		edit func(*http.Request)
		want int
	}{
		{"no event", func(r *http.Request) { r.Header.Del("X-GitHub-Event") }, http.StatusBadRequest},
		{"no delivery", func(r *http.Request) { r.Header.Del("X-GitHub-Delivery") }, http.StatusBadRequest},
		{"form content type", func(r *http.Request) { r.Header.Set("Content-Type", "application/x-www-form-urlencoded") }, http.StatusUnsupportedMediaType},
		{"GET", func(r *http.Request) { r.Method = http.MethodGet }, http.StatusMethodNotAllowed},
	}
	for _, c := range cases {
		if code := f.post(t, d, testWebhookSecret, c.edit); code != c.want {
			t.Errorf("%s: status %d, want %d", c.name, code, c.want)
		}
	}
	if f.h.calls() != 0 || f.seen(t, d.ID) {
		t.Fatalf("refused requests reached the handler (%d) or were recorded", f.h.calls())
	}
	if n := strings.Count(f.log.String(), "github webhook refused"); n != len(cases) {
		t.Fatalf("%d refusal lines, want %d:\n%s", n, len(cases), f.log.String())
	}
	// A signed payload of a handled event that lacks what the handler needs is 400, not recorded.
	bad := ghfake.Delivery{Event: "deployment_review", ID: ghfake.NewDeliveryID(), Body: []byte(`{"action":"approved","workflow_run":{"id":1}}`)}
	if code := f.post(t, bad, testWebhookSecret, nil); code != http.StatusBadRequest || f.seen(t, bad.ID) {
		t.Fatalf("review without approver: status %d, want 400 and not recorded", code)
	}
}

// A handler error answers 500 and leaves the delivery unrecorded; GitHub's
// redelivery (same id) is then processed and recorded.
func TestHandlerErrorThenRedelivery(t *testing.T) {
	f := newFixture(t)
	f.h.fail = 1
	d := ghfake.ProtectionRuleRequested(ghfake.ProtectionRule{Repo: repo, InstallationID: 77, RunID: 123456789,
		Environment: "production", SHA: "abc", Ref: "refs/heads/main", DeploymentID: 99})
	if code := f.post(t, d, testWebhookSecret, nil); code != http.StatusInternalServerError {
		t.Fatalf("failing handler: status %d, want 500", code)
	}
	if f.seen(t, d.ID) {
		t.Fatal("a delivery whose handler failed was recorded as processed")
	}
	if !strings.Contains(f.log.String(), "binding store unavailable") {
		t.Fatalf("handler error not logged:\n%s", f.log.String())
	}
	if code := f.post(t, d, testWebhookSecret, nil); code != http.StatusOK {
		t.Fatalf("redelivery: status %d, want 200", code)
	}
	if f.h.calls() != 2 || len(f.h.rules) != 1 || !f.seen(t, d.ID) {
		t.Fatalf("calls %d (want 2), processed %d (want 1), recorded %v", f.h.calls(), len(f.h.rules), f.seen(t, d.ID))
	}
	ev := f.h.rules[0]
	runID, err := ev.GetRunID()
	if err != nil || runID != 123456789 || ev.GetEnvironment() != "production" || ev.GetInstallation().GetID() != 77 ||
		ev.GetDeployment().GetID() != 99 || ev.GetRepo().GetFullName() != "acme/deploys" {
		t.Fatalf("parsed rule: run %d (%v) env %q inst %d deployment %d repo %q", runID, err, ev.GetEnvironment(),
			ev.GetInstallation().GetID(), ev.GetDeployment().GetID(), ev.GetRepo().GetFullName())
	}
	if code := f.post(t, d, testWebhookSecret, nil); code != http.StatusOK || f.h.calls() != 2 {
		t.Fatalf("third copy: status %d, calls %d; want 200, 2", code, f.h.calls())
	}
}

// A deployment_review "requested" carries "requestor" in the payload; the
// endpoint reads it as the event's Requester, acknowledges it and does not call the
// handler (nothing to decide), recording it so a replay is a no-op.
func TestReviewRequestedRequestor(t *testing.T) {
	f := newFixture(t)
	d := ghfake.DeploymentReview(ghfake.Review{Action: "requested", Repo: repo, InstallationID: 77, RunID: 5,
		Environment: "production", RequestorLogin: "octo-starter"})
	if !bytes.Contains(d.Body, []byte(`"requestor":`)) {
		t.Fatalf("fake payload lacks requestor: %s", d.Body)
	}
	if code := f.post(t, d, testWebhookSecret, nil); code != http.StatusOK || f.h.calls() != 0 || !f.seen(t, d.ID) {
		t.Fatalf("requested review: status %d, calls %d, recorded %v", code, f.h.calls(), f.seen(t, d.ID))
	}
}

// New refuses a short secret and missing dependencies.
func TestNewRefusesShortSecret(t *testing.T) {
	if _, err := webhook.New([]byte("short"), nil, webhook.LogHandler{}, nil); err == nil || !strings.Contains(err.Error(), "at least 16") {
		t.Fatalf("short secret: %v", err)
	}
	if _, err := webhook.New(testWebhookSecret, nil, webhook.LogHandler{}, nil); err == nil {
		t.Fatal("nil store accepted")
	}
}
