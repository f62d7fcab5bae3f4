package ghapi

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
)

// APIVersion is the REST API version every request asks for (X-GitHub-Api-Version).
const APIVersion = "2022-11-28"

// maxErrorBody caps how much of an error response is read for its message.
const maxErrorBody = 64 << 10

// Client calls GitHub's REST API at one base URL with one credential. Safe for concurrent use.
type Client struct {
	base *url.URL
	http *http.Client
	auth func(context.Context) (string, error)
}

// NewClient is a client of the REST API at baseURL (https://api.github.com, GHES
// https://HOST/api/v3, a test server; a trailing slash is optional) over hc (nil:
// http.DefaultClient). auth returns the Authorization header's value for each request
// ("token …", "Bearer …"); nil sends none. Errors: baseURL not an absolute http(s) URL.
func NewClient(baseURL string, hc *http.Client, auth func(context.Context) (string, error)) (*Client, error) {
	u, err := url.Parse(strings.TrimRight(baseURL, "/") + "/")
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
		return nil, fmt.Errorf("GitHub API URL %q: need an absolute http(s) URL such as https://api.github.com", baseURL)
	}
	if hc == nil {
		hc = http.DefaultClient
	}
	return &Client{base: u, http: hc, auth: auth}, nil
}

// ErrorResponse is a REST call GitHub answered with a status other than 2xx: the status,
// the request's method and URL (without query), and GitHub's message when its body had one.
type ErrorResponse struct {
	StatusCode  int
	Method, URL string
	Message     string
}

// Error is "METHOD URL: STATUS MESSAGE".
func (e *ErrorResponse) Error() string {
	msg := fmt.Sprintf("%s %s: %d", e.Method, e.URL, e.StatusCode)
	if e.Message != "" {
		msg += " " + e.Message
	}
	return msg
}

// Do sends method to path (relative to the base URL, e.g. "repos/o/r/actions/runs/1";
// a query may follow) with in as its JSON body (nil: none) and decodes a 2xx answer's JSON
// into out (nil: the body is discarded). It returns the response (its body closed) for
// its status and headers, also with an error when GitHub answered. Errors: the transport's,
// an *ErrorResponse for a status other than 2xx, a body out cannot hold.
func (c *Client) Do(ctx context.Context, method, path string, in, out any) (*http.Response, error) {
	ref, err := url.Parse(strings.TrimLeft(path, "/"))
	if err != nil {
		return nil, fmt.Errorf("GitHub API path %q: %w", path, err)
	}
	u := c.base.ResolveReference(ref)
	var body io.Reader
	if in != nil {
		// An Encoder without HTML escaping: "<", ">" and "&" of a Markdown comment go as
		// they are, and the body ends with a newline.
		var b bytes.Buffer
		enc := json.NewEncoder(&b)
		enc.SetEscapeHTML(false)
		if err := enc.Encode(in); err != nil {
			return nil, err
		}
		body = &b
	}
	req, err := http.NewRequestWithContext(ctx, method, u.String(), body)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept", "application/vnd.github+json")
	req.Header.Set("X-GitHub-Api-Version", APIVersion)
	req.Header.Set("User-Agent", "rbook")
	if in != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if c.auth != nil {
		a, err := c.auth(ctx)
		if err != nil {
			return nil, err
		}
		req.Header.Set("Authorization", a)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	where := *u
	where.RawQuery, where.User = "", nil
	if resp.StatusCode/100 != 2 {
		e := &ErrorResponse{StatusCode: resp.StatusCode, Method: method, URL: where.String()}
		var msg struct {
			Message string `json:"message"`
		}
		if b, _ := io.ReadAll(io.LimitReader(resp.Body, maxErrorBody)); json.Unmarshal(b, &msg) == nil {
			e.Message = msg.Message
		}
		return resp, e
	}
	if out == nil {
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, maxErrorBody))
		return resp, nil
	}
	if err := json.NewDecoder(resp.Body).Decode(out); err != nil && !errors.Is(err, io.EOF) {
		return resp, fmt.Errorf("%s %s: answer is not the expected JSON: %w", method, where.String(), err)
	}
	return resp, nil
}

// NextPage is the page number of the Link header's rel="next" URL (GitHub's "Using
// pagination in the REST API"), 0 when there is none.
func NextPage(resp *http.Response) int {
	if resp == nil {
		return 0
	}
	for _, link := range strings.Split(resp.Header.Get("Link"), ",") {
		target, params, ok := strings.Cut(strings.TrimSpace(link), ";")
		if !ok || !strings.Contains(params, `rel="next"`) {
			continue
		}
		u, err := url.Parse(strings.Trim(strings.TrimSpace(target), "<>"))
		if err != nil {
			return 0
		}
		n, _ := strconv.Atoi(u.Query().Get("page"))
		return n
	}
	return 0
}
