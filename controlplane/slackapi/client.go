package slackapi

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// maxAnswer caps how much of a Web API answer is read.
const maxAnswer = 1 << 20

// Client calls Slack's Web API with one bot token. Safe for concurrent use.
type Client struct {
	token, apiURL string
	http          *http.Client
}

// New is a client of the Web API at apiURL (ending in "/", e.g. https://slack.com/api/)
// with the bot token, over hc (nil: http.DefaultClient).
func New(token, apiURL string, hc *http.Client) *Client {
	if hc == nil {
		hc = http.DefaultClient
	}
	return &Client{token: token, apiURL: apiURL, http: hc}
}

// APIError is a Web API answer with "ok": false: Err is Slack's error code
// ("channel_not_found", "invalid_auth", …).
type APIError struct{ Method, Err string }

// Error is "METHOD: CODE".
func (e *APIError) Error() string { return e.Method + ": " + e.Err }

// StatusError is an HTTP status other than 200 (and 429).
type StatusError struct {
	Code   int
	Status string
}

// Error is "slack server error: STATUS".
func (e *StatusError) Error() string { return "slack server error: " + e.Status }

// RateLimitedError is HTTP 429: retry after RetryAfter (Retry-After, seconds).
type RateLimitedError struct{ RetryAfter time.Duration }

// Error says how long to wait.
func (e *RateLimitedError) Error() string {
	return fmt.Sprintf("slack rate limit exceeded, retry after %s", e.RetryAfter)
}

// call posts method's arguments (a form when form is set, else JSON) with the token in the
// Authorization header, and decodes the answer into out. Errors: the transport's (a
// *url.Error without the token: it is never in the URL), *RateLimitedError, *StatusError,
// *APIError.
func (c *Client) call(ctx context.Context, method string, form url.Values, js any, out any) error {
	var body io.Reader
	ctype := "application/x-www-form-urlencoded"
	if js != nil {
		b, err := json.Marshal(js)
		if err != nil {
			return err
		}
		body, ctype = bytes.NewReader(b), "application/json; charset=utf-8"
	} else {
		body = strings.NewReader(form.Encode())
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.apiURL+method, body)
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", ctype)
	req.Header.Set("Authorization", "Bearer "+c.token)
	resp, err := c.http.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	switch {
	case resp.StatusCode == http.StatusTooManyRequests:
		s, _ := strconv.Atoi(resp.Header.Get("Retry-After"))
		return &RateLimitedError{RetryAfter: time.Duration(s) * time.Second}
	case resp.StatusCode != http.StatusOK:
		return &StatusError{Code: resp.StatusCode, Status: resp.Status}
	}
	var res struct {
		OK      bool   `json:"ok"`
		Error   string `json:"error"`
		Channel string `json:"channel"`
		TS      string `json:"ts"`
	}
	raw, err := io.ReadAll(io.LimitReader(resp.Body, maxAnswer))
	if err != nil {
		return err
	}
	if err := json.Unmarshal(raw, &res); err != nil {
		return fmt.Errorf("%s: the answer is not Slack's JSON", method)
	}
	if !res.OK {
		return &APIError{Method: method, Err: res.Error}
	}
	if out != nil {
		return json.Unmarshal(raw, out)
	}
	return nil
}

// message is the arguments of chat.postMessage and chat.update.
func message(channel, text string, blocks []Block) (url.Values, error) {
	f := url.Values{"channel": {channel}, "text": {text}}
	if len(blocks) > 0 {
		var b bytes.Buffer
		enc := json.NewEncoder(&b)
		enc.SetEscapeHTML(false)
		if err := enc.Encode(blocks); err != nil {
			return nil, err
		}
		f.Set("blocks", strings.TrimSuffix(b.String(), "\n"))
	}
	return f, nil
}

// PostMessage posts text (the fallback) and blocks to channel, in the thread of threadTS
// when it is not "" (chat.postMessage). It returns the message's channel and ts.
func (c *Client) PostMessage(ctx context.Context, channel, text string, blocks []Block, threadTS string) (string, string, error) {
	f, err := message(channel, text, blocks)
	if err != nil {
		return "", "", err
	}
	if threadTS != "" {
		f.Set("thread_ts", threadTS)
	}
	var out struct {
		Channel string `json:"channel"`
		TS      string `json:"ts"`
	}
	err = c.call(ctx, "chat.postMessage", f, nil, &out)
	return out.Channel, out.TS, err
}

// UpdateMessage replaces the text and blocks of the message ts in channel (chat.update).
func (c *Client) UpdateMessage(ctx context.Context, channel, ts, text string, blocks []Block) error {
	f, err := message(channel, text, blocks)
	if err != nil {
		return err
	}
	f.Set("ts", ts)
	return c.call(ctx, "chat.update", f, nil, nil)
}

// PostEphemeral shows text to user only, in channel (chat.postEphemeral).
func (c *Client) PostEphemeral(ctx context.Context, channel, user, text string) error {
	return c.call(ctx, "chat.postEphemeral", url.Values{"channel": {channel}, "user": {user}, "text": {text}}, nil, nil)
}

// OpenView opens view for the user whose interaction gave triggerID (views.open).
func (c *Client) OpenView(ctx context.Context, triggerID string, view ModalView) error {
	return c.call(ctx, "views.open", nil, struct {
		TriggerID string    `json:"trigger_id"`
		View      ModalView `json:"view"`
	}{triggerID, view}, nil)
}
