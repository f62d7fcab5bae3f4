// Package slackfake is a fake Slack for tests, built from Slack's documented shapes: a Web
// API server answering chat.postMessage, chat.update, chat.postEphemeral and views.open
// (https://docs.slack.dev/reference/methods: form-encoded or JSON bodies, the token as a
// form field or a bearer header, answers {"ok": true, …} or {"ok": false, "error": "…"}),
// recording what it was sent; and a sender of interaction requests (button presses, modal
// submissions) signed exactly as Slack signs them: a form with one field, payload, holding
// the JSON, with X-Slack-Request-Timestamp and X-Slack-Signature "v0=" + hex HMAC-SHA256 of
// "v0:<timestamp>:<body>" keyed with the app's signing secret
// (https://docs.slack.dev/authentication/verifying-requests-from-slack/). Nothing here was
// checked against the real Slack.
package slackfake

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Message is a message the fake holds: posted by chat.postMessage, changed by chat.update.
type Message struct {
	Channel, TS string
	// ThreadTS is the message it replies to ("" for a top-level message).
	ThreadTS string
	Text     string
	// Blocks is the Block Kit JSON as last posted or updated (nil when none).
	Blocks json.RawMessage
	// Updates counts chat.update calls on it.
	Updates int
}

// AllText is the message's text and every "text" string in its blocks, joined by newlines:
// what a reader sees, for assertions.
func (m Message) AllText() string {
	out := []string{m.Text}
	var walk func(v any)
	walk = func(v any) {
		switch x := v.(type) {
		case map[string]any:
			if s, ok := x["text"].(string); ok {
				out = append(out, s)
			}
			for _, c := range x {
				walk(c)
			}
		case []any:
			for _, c := range x {
				walk(c)
			}
		}
	}
	var blocks any
	if json.Unmarshal(m.Blocks, &blocks) == nil {
		walk(blocks)
	}
	return strings.Join(out, "\n")
}

// Button is a button element of a message's blocks.
type Button struct {
	ActionID, Value, URL, Text string
}

// Buttons lists the message's buttons in block order.
func (m Message) Buttons() []Button {
	var blocks []struct {
		Elements []struct {
			Type     string `json:"type"`
			ActionID string `json:"action_id"`
			Value    string `json:"value"`
			URL      string `json:"url"`
			Text     struct {
				Text string `json:"text"`
			} `json:"text"`
		} `json:"elements"`
	}
	_ = json.Unmarshal(m.Blocks, &blocks)
	var out []Button
	for _, b := range blocks {
		for _, e := range b.Elements {
			if e.Type == "button" {
				out = append(out, Button{ActionID: e.ActionID, Value: e.Value, URL: e.URL, Text: e.Text.Text})
			}
		}
	}
	return out
}

// Ephemeral is a chat.postEphemeral call: a message only User sees.
type Ephemeral struct {
	Channel, User, Text string
}

// View is a views.open call.
type View struct {
	TriggerID string
	// View is the modal's JSON.
	View json.RawMessage
}

// Fake is a fake Slack Web API. Its zero value is not usable: call New.
type Fake struct {
	srv   *httptest.Server
	token string
	chans []string

	mu         sync.Mutex
	seq        int
	messages   []*Message
	ephemerals []Ephemeral
	views      []View
	calls      []string
	fail       map[string]string
	changed    chan struct{}
}

// New starts a fake Slack that accepts bot token token and posts to the channel ids
// channels (any channel when none are given). Close it when done.
func New(token string, channels ...string) *Fake {
	f := &Fake{token: token, chans: channels, fail: map[string]string{}, changed: make(chan struct{})}
	f.srv = httptest.NewServer(http.HandlerFunc(f.serve))
	return f
}

// APIURL is the base URL of the fake's Web API ("http://127.0.0.1:PORT/api/"), a slack
// channel's api_url.
func (f *Fake) APIURL() string { return f.srv.URL + "/api/" }

// Close stops the fake.
func (f *Fake) Close() { f.srv.Close() }

// FailNext makes the next call of method answer {"ok": false, "error": errCode}.
func (f *Fake) FailNext(method, errCode string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.fail[method] = errCode
}

// Changed is closed at the fake's next change (a call recorded): wait on it, then look again.
func (f *Fake) Changed() <-chan struct{} {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.changed
}

// WaitFor waits until cond holds of the fake's state, re-checking at each change, at most
// timeout; it reports whether cond held.
func (f *Fake) WaitFor(timeout time.Duration, cond func(f *Fake) bool) bool {
	deadline := time.After(timeout)
	for {
		ch := f.Changed()
		if cond(f) {
			return true
		}
		select {
		case <-ch:
		case <-deadline:
			return cond(f)
		}
	}
}

// Messages is a copy of every message, in posting order.
func (f *Fake) Messages() []Message {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := make([]Message, len(f.messages))
	for i, m := range f.messages {
		out[i] = *m
	}
	return out
}

// TopLevel is a copy of the messages that are not thread replies, in posting order.
func (f *Fake) TopLevel() []Message {
	return slices.DeleteFunc(f.Messages(), func(m Message) bool { return m.ThreadTS != "" })
}

// Replies is a copy of the replies in the thread of ts, in posting order.
func (f *Fake) Replies(ts string) []Message {
	return slices.DeleteFunc(f.Messages(), func(m Message) bool { return m.ThreadTS != ts })
}

// Ephemerals is a copy of every ephemeral message, in order.
func (f *Fake) Ephemerals() []Ephemeral {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.ephemerals)
}

// Views is a copy of every views.open call, in order.
func (f *Fake) Views() []View {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.views)
}

// Calls lists the methods called successfully, in order ("chat.postMessage", …).
func (f *Fake) Calls() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.calls)
}

// params reads a Web API call's arguments: a form (application/x-www-form-urlencoded) or a
// JSON object (application/json), and the token from the Authorization header or the form.
func params(r *http.Request) (map[string]any, string, error) {
	body, err := io.ReadAll(io.LimitReader(r.Body, 4<<20))
	if err != nil {
		return nil, "", err
	}
	token := ""
	if v, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer "); ok {
		token = v
	}
	out := map[string]any{}
	if strings.HasPrefix(r.Header.Get("Content-Type"), "application/json") {
		if err := json.Unmarshal(body, &out); err != nil {
			return nil, "", err
		}
		return out, token, nil
	}
	form, err := url.ParseQuery(string(body))
	if err != nil {
		return nil, "", err
	}
	for k := range form {
		out[k] = form.Get(k)
	}
	if token == "" {
		token = form.Get("token")
	}
	return out, token, nil
}

func str(p map[string]any, k string) string {
	switch v := p[k].(type) {
	case string:
		return v
	case nil:
		return ""
	default:
		b, _ := json.Marshal(v)
		return string(b)
	}
}

func answer(w http.ResponseWriter, v map[string]any) {
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	_ = json.NewEncoder(w).Encode(v)
}

func (f *Fake) serve(w http.ResponseWriter, r *http.Request) {
	method, ok := strings.CutPrefix(r.URL.Path, "/api/")
	if !ok || r.Method != http.MethodPost {
		http.NotFound(w, r)
		return
	}
	p, token, err := params(r)
	if err != nil {
		answer(w, map[string]any{"ok": false, "error": "invalid_form_data"})
		return
	}
	switch {
	case token == "":
		answer(w, map[string]any{"ok": false, "error": "not_authed"})
		return
	case token != f.token:
		answer(w, map[string]any{"ok": false, "error": "invalid_auth"})
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if e := f.fail[method]; e != "" {
		delete(f.fail, method)
		answer(w, map[string]any{"ok": false, "error": e})
		return
	}
	res, errCode := f.call(method, p)
	if errCode != "" {
		answer(w, map[string]any{"ok": false, "error": errCode})
		return
	}
	f.calls = append(f.calls, method)
	close(f.changed)
	f.changed = make(chan struct{})
	res["ok"] = true
	answer(w, res)
}

// call runs one method on the fake's state (f.mu held): its answer's fields, or an error code.
func (f *Fake) call(method string, p map[string]any) (map[string]any, string) {
	channel := str(p, "channel")
	knownChannel := len(f.chans) == 0 || slices.Contains(f.chans, channel)
	hasContent := str(p, "text") != "" || str(p, "blocks") != ""
	switch method {
	case "chat.postMessage":
		switch {
		case channel == "" || !knownChannel:
			return nil, "channel_not_found"
		case !hasContent:
			return nil, "no_text"
		}
		thread := str(p, "thread_ts")
		if thread != "" && f.find(channel, thread) == nil {
			return nil, "thread_not_found"
		}
		f.seq++
		m := &Message{Channel: channel, TS: fmt.Sprintf("%d.%06d", 1_715_512_000+f.seq, f.seq), ThreadTS: thread, Text: str(p, "text")}
		if b := str(p, "blocks"); b != "" {
			m.Blocks = json.RawMessage(b)
		}
		f.messages = append(f.messages, m)
		return map[string]any{"channel": channel, "ts": m.TS, "message": map[string]any{"text": m.Text, "ts": m.TS}}, ""
	case "chat.update":
		m := f.find(channel, str(p, "ts"))
		switch {
		case !knownChannel:
			return nil, "channel_not_found"
		case m == nil:
			return nil, "message_not_found"
		case !hasContent:
			return nil, "no_text"
		}
		m.Text, m.Updates = str(p, "text"), m.Updates+1
		if b := str(p, "blocks"); b != "" {
			m.Blocks = json.RawMessage(b)
		}
		return map[string]any{"channel": channel, "ts": m.TS, "text": m.Text}, ""
	case "chat.postEphemeral":
		switch {
		case !knownChannel || channel == "":
			return nil, "channel_not_found"
		case str(p, "user") == "":
			return nil, "user_not_in_channel"
		case !hasContent:
			return nil, "no_text"
		}
		f.ephemerals = append(f.ephemerals, Ephemeral{Channel: channel, User: str(p, "user"), Text: str(p, "text")})
		f.seq++
		return map[string]any{"message_ts": fmt.Sprintf("%d.%06d", 1_715_512_000+f.seq, f.seq)}, ""
	case "views.open":
		trigger := str(p, "trigger_id")
		view, ok := p["view"]
		if s, isStr := view.(string); isStr { // form-encoded: the view is a JSON string
			ok = json.Unmarshal([]byte(s), &view) == nil
		}
		switch {
		case trigger == "":
			return nil, "invalid_trigger_id"
		case !ok || view == nil:
			return nil, "invalid_arguments"
		}
		raw, _ := json.Marshal(view)
		f.views = append(f.views, View{TriggerID: trigger, View: raw})
		return map[string]any{"view": map[string]any{"id": "V" + strconv.Itoa(len(f.views))}}, ""
	}
	return nil, "unknown_method"
}

func (f *Fake) find(channel, ts string) *Message {
	for _, m := range f.messages {
		if m.Channel == channel && m.TS == ts {
			return m
		}
	}
	return nil
}

// Sign is the X-Slack-Signature of body sent at timestamp (Unix seconds) with signing
// secret: "v0=" + hex HMAC-SHA256 of "v0:<timestamp>:<body>".
func Sign(secret string, timestamp int64, body []byte) string {
	mac := hmac.New(sha256.New, []byte(secret))
	fmt.Fprintf(mac, "v0:%d:", timestamp)
	mac.Write(body)
	return "v0=" + hex.EncodeToString(mac.Sum(nil))
}

// Request is one interaction request as Slack sends it, kept so a test can send the same
// bytes again (a replay).
type Request struct {
	URL       string
	Body      []byte
	Timestamp int64
	Signature string
}

// NewRequest builds the interaction request Slack would send to target with payload (marshalled
// to JSON, form-encoded as payload=…), signed with secret at timestamp.
func NewRequest(target, secret string, timestamp int64, payload any) (*Request, error) {
	js, err := json.Marshal(payload)
	if err != nil {
		return nil, err
	}
	body := []byte("payload=" + url.QueryEscape(string(js)))
	return &Request{URL: target, Body: body, Timestamp: timestamp, Signature: Sign(secret, timestamp, body)}, nil
}

// Send posts the request (again, if it was sent before) and returns the status and body.
func (r *Request) Send(c *http.Client) (int, []byte, error) {
	req, err := http.NewRequest(http.MethodPost, r.URL, bytes.NewReader(r.Body))
	if err != nil {
		return 0, nil, err
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("User-Agent", "Slackbot 1.0 (+https://api.slack.com/robots)")
	if r.Timestamp != 0 {
		req.Header.Set("X-Slack-Request-Timestamp", strconv.FormatInt(r.Timestamp, 10))
	}
	if r.Signature != "" {
		req.Header.Set("X-Slack-Signature", r.Signature)
	}
	resp, err := c.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, b, err
}

// User is who acts in an interaction: a Slack team (workspace) id and user id.
type User struct {
	Team, ID, Name string
}

var triggers atomic.Int64

// trigger is a fresh trigger_id in Slack's shape ("<digits>.<digits>.<hex>").
func trigger() string {
	n := triggers.Add(1)
	return fmt.Sprintf("%d.%d.%032x", 1_715_512_000+n, 98765, n)
}

// envelope is what every interaction payload carries: its type, the team and user, the app.
func envelope(u User, kind string) map[string]any {
	return map[string]any{
		"type":       kind,
		"team":       map[string]any{"id": u.Team, "domain": "example"},
		"user":       map[string]any{"id": u.ID, "username": u.Name, "name": u.Name, "team_id": u.Team},
		"api_app_id": "A0RBOOK",
		"token":      "deprecated-verification-token",
		"trigger_id": trigger(),
	}
}

// BlockActions is the payload of a button press on message ts in channel
// (https://docs.slack.dev/reference/interaction-payloads/block_actions-payload).
func BlockActions(u User, channel, messageTS, actionID, value string) map[string]any {
	now := time.Now()
	p := envelope(u, "block_actions")
	p["container"] = map[string]any{"type": "message", "message_ts": messageTS, "channel_id": channel, "is_ephemeral": false}
	p["channel"] = map[string]any{"id": channel, "name": "ops"}
	p["message"] = map[string]any{"type": "message", "ts": messageTS, "text": "…"}
	p["response_url"] = "https://hooks.slack.com/actions/T0/1/x"
	p["actions"] = []any{map[string]any{
		"action_id": actionID, "block_id": "rbook_gate", "type": "button", "value": value,
		"action_ts": fmt.Sprintf("%d.%06d", now.Unix(), now.Nanosecond()/1000),
		"text":      map[string]any{"type": "plain_text", "text": actionID, "emoji": true},
	}}
	return p
}

// ViewSubmission is the payload of a modal's submission
// (https://docs.slack.dev/reference/interaction-payloads/view-interactions-payload):
// callbackID and privateMetadata as the modal was opened with, and values as state.values
// (block id → action id → {"type": …, "value": …} or {"selected_option": {"value": …}}).
func ViewSubmission(u User, callbackID, privateMetadata string, values map[string]map[string]any) map[string]any {
	p := envelope(u, "view_submission")
	p["view"] = map[string]any{
		"id": "V0RBOOK", "type": "modal", "callback_id": callbackID, "private_metadata": privateMetadata,
		"state": map[string]any{"values": values}, "hash": "1715512345.abcdef",
	}
	return p
}

// TextValue is a plain_text_input's state value; Selected a static_select's.
func TextValue(v string) map[string]any {
	return map[string]any{"value": map[string]any{"type": "plain_text_input", "value": v}}
}

// Selected is a static_select's state value with option v chosen.
func Selected(v string) map[string]any {
	return map[string]any{"value": map[string]any{"type": "static_select",
		"selected_option": map[string]any{"value": v, "text": map[string]any{"type": "plain_text", "text": v}}}}
}
