package slackapi_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rbookhq/rbook-action/controlplane/notify/slackfake"
	"github.com/rbookhq/rbook-action/controlplane/slackapi"
)

// A request verifies only with its own body, the signing secret and a timestamp within five
// minutes; the errors say which check failed and hold no secret.
func TestVerifyAcceptsOnlyAFreshSignatureOfTheBody(t *testing.T) {
	const secret = "slackapi-test-signing-secret"
	now := time.Unix(1_778_583_600, 0)
	body := []byte("payload=%7B%7D")
	header := func(ts int64, sig string) http.Header {
		h := http.Header{}
		if ts != 0 {
			h.Set(slackapi.TimestampHeader, strconv.FormatInt(ts, 10))
		}
		if sig != "" {
			h.Set(slackapi.SignatureHeader, sig)
		}
		return h
	}
	good := slackfake.Sign(secret, now.Unix(), body)
	for _, c := range []struct {
		name string
		h    http.Header
		body []byte
		want error
	}{
		{"signed now", header(now.Unix(), good), body, nil},
		{"four minutes old", header(now.Unix()-240, slackfake.Sign(secret, now.Unix()-240, body)), body, nil},
		{"six minutes old", header(now.Unix()-360, slackfake.Sign(secret, now.Unix()-360, body)), body, slackapi.ErrExpiredTimestamp},
		{"other body", header(now.Unix(), good), []byte("payload=%7B%22x%22%7D"), slackapi.ErrBadSignature},
		{"other secret", header(now.Unix(), slackfake.Sign("another-secret", now.Unix(), body)), body, slackapi.ErrBadSignature},
		{"no signature", header(now.Unix(), ""), body, slackapi.ErrMissingHeaders},
		{"no timestamp", header(0, good), body, slackapi.ErrMissingHeaders},
		{"not v0", header(now.Unix(), "v1="+strings.TrimPrefix(good, "v0=")), body, slackapi.ErrBadSignature},
	} {
		err := slackapi.Verify(c.h, c.body, secret, now)
		if !errors.Is(err, c.want) || (c.want == nil) != (err == nil) {
			t.Errorf("%s: %v, want %v", c.name, err, c.want)
		}
	}
}

// Web API answers become the documented errors: "ok": false is an *APIError with Slack's
// code, 429 a *RateLimitedError with Retry-After, another status a *StatusError; a posted
// message's channel and ts are returned.
func TestClientAnswersBecomeTypedErrors(t *testing.T) {
	fake := slackfake.New("xoxb-slackapi-test", "C0123ABCD")
	defer fake.Close()
	c := slackapi.New("xoxb-slackapi-test", fake.APIURL(), nil)
	ctx := context.Background()
	ch, ts, err := c.PostMessage(ctx, "C0123ABCD", "hello", []slackapi.Block{slackapi.NewHeader(slackapi.NewText(slackapi.PlainTextType, "Hi <you> & me", false, false))}, "")
	if err != nil || ch != "C0123ABCD" || ts == "" {
		t.Fatalf("post: %q %q %v", ch, ts, err)
	}
	if m := fake.Messages(); len(m) != 1 || !strings.Contains(string(m[0].Blocks), `{"type":"header","text":{"type":"plain_text","text":"Hi <you> & me","emoji":false}}`) {
		t.Fatalf("posted blocks: %+v", m)
	}
	var api *slackapi.APIError
	if err := c.UpdateMessage(ctx, "C0123ABCD", "1.000001", "x", nil); !errors.As(err, &api) || api.Err != "message_not_found" {
		t.Fatalf("update of a missing message: %v", err)
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasSuffix(r.URL.Path, "chat.postEphemeral") {
			w.Header().Set("Retry-After", "7")
			w.WriteHeader(http.StatusTooManyRequests)
			return
		}
		w.WriteHeader(http.StatusBadGateway)
	}))
	defer srv.Close()
	c = slackapi.New("xoxb-slackapi-test", srv.URL+"/api/", nil)
	var rl *slackapi.RateLimitedError
	if err := c.PostEphemeral(ctx, "C1", "U1", "x"); !errors.As(err, &rl) || rl.RetryAfter != 7*time.Second {
		t.Fatalf("429: %v", err)
	}
	var st *slackapi.StatusError
	if err := c.OpenView(ctx, "trigger", slackapi.ModalView{Type: "modal"}); !errors.As(err, &st) || st.Code != http.StatusBadGateway ||
		strings.Contains(err.Error(), "xoxb-") {
		t.Fatalf("502: %v", err)
	}
}
