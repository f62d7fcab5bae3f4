// Package notify is the control plane's notification configuration and channels
// (docs/notifications.md): which channels exist (a webhook signed per the Standard Webhooks
// specification, a Microsoft Teams workflow webhook, email over SMTP, a Slack message per
// gate: slack.go), which events of which runs each route sends where (first match wins, then the default), and how each channel
// sends one event. The outbox that makes delivery durable is the store's
// (store.NotificationEvent); the loop that drives it is the server's.
package notify

import (
	"cmp"
	"fmt"
	"io"
	"net/mail"
	"net/url"
	"os"
	"path"
	"slices"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/rbookhq/rbook-action/controlplane/approval"
	"github.com/rbookhq/rbook-action/controlplane/store"
	"github.com/rbookhq/rbook-action/controlplane/yamlerr"
	"github.com/rbookhq/rbook-action/internal/lazyregexp"
)

// MaxConfigBytes caps a notification config file.
const MaxConfigBytes = 256 << 10

// Config is a parsed notification config (rbook serve --notify-config).
type Config struct {
	// File is the path it was read from (named in errors and logs).
	File string
	// Channels by name, in file order in Names.
	Channels map[string]Channel
	Names    []string
	// Routes are tried in order; the first that matches an event chooses its channels.
	Routes []Route
	// Default chooses the channels of an event no route matched (nil: none).
	Default *Route
	// Retention is how long delivered and given-up notification rows are kept
	// (retention:, at least MinRetention); zero means store.DefaultNotificationRetention.
	Retention time.Duration
}

// Route is one routing rule: an event matches when each glob matches (path.Match; "*" for an
// absent field, and an event without a repository or environment matches only "*") and its
// kind is in Events (every kind when empty).
type Route struct {
	// Line is the route's line in the file.
	Line                             int
	Runbook, Environment, Repository string
	Events                           []string
	Channels                         []string
	// Escalate are the route's escalation steps, by increasing delay: a gate whose
	// gate.opened event this route sent and that is still pending After its opening is
	// announced (gate.escalated) to the step's channels, once per step.
	Escalate []EscalationStep
}

// EscalationStep is one step of a route's escalation.
type EscalationStep struct {
	After    time.Duration
	Channels []string
	// Line is the step's line in the file.
	Line int
	// Notify are the people the step's email channels also mail: "person:<id>",
	// "group:<name>" (people-directory names) and "email:<address>", as a gate policy's
	// notify list (approval.ParseNotify); NotifyLine is its line, 0 without one.
	Notify     []string
	NotifyLine int
	// notifyField names the notify list in errors ("routes[0].escalate[1].notify").
	notifyField string
}

// Match reports whether route r matches an event of kind about the run d describes.
func (r Route) Match(kind string, d store.EventData) bool {
	glob := func(p, v string) bool {
		if p == "" || p == "*" {
			return true
		}
		ok, _ := path.Match(p, v)
		return ok && v != ""
	}
	return glob(r.Runbook, d.Runbook) && glob(r.Environment, d.Environment) && glob(r.Repository, d.Repository) &&
		(len(r.Events) == 0 || slices.Contains(r.Events, kind))
}

// ChannelsFor is the channels an event of kind about d goes to: the first matching route's,
// else the default's, else none.
func (c *Config) ChannelsFor(kind string, d store.EventData) []string {
	if r := c.RouteFor(kind, d); r != nil {
		return r.Channels
	}
	return nil
}

// HasEscalation reports whether any route escalates.
func (c *Config) HasEscalation() bool {
	if c.Default != nil && len(c.Default.Escalate) > 0 {
		return true
	}
	for _, r := range c.Routes {
		if len(r.Escalate) > 0 {
			return true
		}
	}
	return false
}

// RouteFor is the route an event of kind about d takes: the first matching route, else the
// default when it matches, else nil.
func (c *Config) RouteFor(kind string, d store.EventData) *Route {
	for i := range c.Routes {
		if c.Routes[i].Match(kind, d) {
			return &c.Routes[i]
		}
	}
	if c.Default != nil && c.Default.Match(kind, d) {
		return c.Default
	}
	return nil
}

// LoadConfig reads a notification config file (docs/notifications.md, "Configuration"):
//
//	channels:
//	  - name: hooks                # [a-z0-9_-], unique
//	    kind: webhook              # webhook | teams | email
//	    url: https://hooks.example.com/rbook
//	    secret_env: RBOOK_HOOK_SECRET   # or secret_file: a "whsec_<base64>" secret
//	routes:
//	  - runbook: deploy-*          # globs; absent means any
//	    environment: prod
//	    repository: acme/*
//	    events: [gate.opened, gate.decided]   # absent means every event
//	    channels: [hooks]
//	default:
//	  channels: [hooks]
//
// Secrets (a webhook's signing secret, a Teams workflow URL, an SMTP password) come from an
// environment variable (…_env) or a file (…_file), read now, never from the config text.
// It is read as strictly as every rbook YAML file: one document, no unknown or duplicate
// keys, no aliases or non-core tags. Errors are "file:line: field: what to do".
func LoadConfig(file string) (*Config, error) {
	f, err := os.Open(file)
	if err != nil {
		return nil, fmt.Errorf("notification config: %w", err)
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, MaxConfigBytes+1))
	if err != nil {
		return nil, fmt.Errorf("notification config %s: %w", file, err)
	}
	return ParseConfig(data, file, os.LookupEnv)
}

// ParseConfig parses notification config text; file names it in errors and relative
// secret files are read relative to the working directory; env looks environment variables
// up. See LoadConfig.
func ParseConfig(data []byte, file string, env func(string) (string, bool)) (*Config, error) {
	doc, err := yamlerr.DecodeOne(file, data, MaxConfigBytes, "notification config", `a mapping with "channels" and "routes" or "default"`)
	if err != nil {
		return nil, err
	}
	p := &parser{file: file, env: env}
	if err := p.check(doc); err != nil {
		return nil, err
	}
	root := doc.Content[0]
	c := &Config{File: file, Channels: map[string]Channel{}}
	err = p.mapping(root, "", map[string]func(v *yaml.Node, field string) error{
		"channels": func(v *yaml.Node, field string) error {
			return p.list(v, field, func(n *yaml.Node, field string) error {
				ch, name, err := p.channel(n, field)
				if err != nil {
					return err
				}
				if _, dup := c.Channels[name]; dup {
					return p.errAt(n, "%s.name: channel %q is defined twice", field, name)
				}
				c.Channels[name] = ch
				c.Names = append(c.Names, name)
				return nil
			})
		},
		"routes": func(v *yaml.Node, field string) error {
			return p.list(v, field, func(n *yaml.Node, field string) error {
				r, err := p.route(n, field)
				c.Routes = append(c.Routes, r)
				return err
			})
		},
		"default": func(v *yaml.Node, field string) error {
			r, err := p.route(v, field)
			c.Default = &r
			return err
		},
		"retention": func(v *yaml.Node, field string) error {
			var err error
			c.Retention, err = p.retention(v, field)
			return err
		},
	})
	if err != nil {
		return nil, err
	}
	if len(c.Channels) == 0 {
		return nil, p.errAt(root, "channels: none defined: add at least one channel (kind webhook, teams, email or slack)")
	}
	routes := append([]Route{}, c.Routes...)
	if c.Default != nil {
		routes = append(routes, *c.Default)
	}
	if len(routes) == 0 {
		return nil, p.errAt(root, "routes: no route and no default, so nothing would ever be sent: add routes or a default")
	}
	for _, r := range routes {
		lists := []struct {
			line  int
			names []string
		}{{r.Line, r.Channels}}
		for _, e := range r.Escalate {
			lists = append(lists, struct {
				line  int
				names []string
			}{e.Line, e.Channels})
		}
		for _, l := range lists {
			for _, name := range l.names {
				if _, ok := c.Channels[name]; !ok {
					return nil, fmt.Errorf("%s:%d: channels: %q is not a defined channel (defined: %s)", file, l.line, name, strings.Join(c.Names, ", "))
				}
			}
		}
		for _, e := range r.Escalate {
			if len(e.Notify) > 0 && !slices.ContainsFunc(e.Channels, func(name string) bool { return c.Channels[name].Kind() == "email" }) {
				return nil, fmt.Errorf("%s:%d: %s: the step has no email channel to mail %s: add an email channel to its channels",
					file, e.NotifyLine, e.notifyField, strings.Join(e.Notify, ", "))
			}
		}
	}
	return c, nil
}

type parser struct {
	file string
	env  func(string) (string, bool)
}

func (p *parser) errAt(n *yaml.Node, format string, args ...any) error {
	return fmt.Errorf("%s:%d: %s", p.file, n.Line, fmt.Sprintf(format, args...))
}

// check refuses aliases, anchors, non-core tags and duplicate keys, and wants one mapping.
func (p *parser) check(doc *yaml.Node) error {
	if len(doc.Content) != 1 || doc.Content[0].Kind != yaml.MappingNode {
		return fmt.Errorf("%s:1: want a mapping with \"channels\" and \"routes\" or \"default\"", p.file)
	}
	var walk func(n *yaml.Node) error
	walk = func(n *yaml.Node) error {
		if n.Kind == yaml.AliasNode || n.Anchor != "" {
			return p.errAt(n, "anchors and aliases are not allowed in a notification config")
		}
		switch n.ShortTag() {
		case "!!str", "!!int", "!!float", "!!bool", "!!null", "!!map", "!!seq":
		default:
			return p.errAt(n, "tag %s is not allowed (only the YAML core schema's)", n.Tag)
		}
		for _, c := range n.Content {
			if err := walk(c); err != nil {
				return err
			}
		}
		return nil
	}
	return walk(doc.Content[0])
}

// mapping walks mapping n: each key must be one of fields (no duplicates); prefix names the
// mapping in errors ("channels[0]").
func (p *parser) mapping(n *yaml.Node, prefix string, fields map[string]func(v *yaml.Node, field string) error) error {
	names := make([]string, 0, len(fields))
	for k := range fields {
		names = append(names, k)
	}
	slices.Sort(names)
	where := strings.TrimSuffix(prefix, ".")
	if n.Kind != yaml.MappingNode {
		return p.errAt(n, "%s: want a mapping with %s", cmpOr(where, "the config"), strings.Join(names, ", "))
	}
	seen := map[string]bool{}
	for i := 0; i < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		fn, ok := fields[k.Value]
		if !ok {
			return p.errAt(k, "%s: unknown field %q (fields: %s)", cmpOr(where, "the config"), k.Value, strings.Join(names, ", "))
		}
		if seen[k.Value] {
			return p.errAt(k, "%s%s: given twice", prefix, k.Value)
		}
		seen[k.Value] = true
		if err := fn(v, prefix+k.Value); err != nil {
			return err
		}
	}
	return nil
}

func cmpOr(a, b string) string {
	if a == "" {
		return b
	}
	return a
}

func (p *parser) list(n *yaml.Node, field string, each func(n *yaml.Node, field string) error) error {
	if n.Kind != yaml.SequenceNode {
		return p.errAt(n, "%s: want a list", field)
	}
	for i, e := range n.Content {
		if err := each(e, fmt.Sprintf("%s[%d]", field, i)); err != nil {
			return err
		}
	}
	return nil
}

func (p *parser) str(n *yaml.Node, field string) (string, error) {
	if n.Kind != yaml.ScalarNode || n.ShortTag() != "!!str" || n.Value == "" {
		return "", p.errAt(n, "%s: want a non-empty string", field)
	}
	if len(n.Value) > 2048 {
		return "", p.errAt(n, "%s: longer than 2048 bytes", field)
	}
	return n.Value, nil
}

func (p *parser) strs(n *yaml.Node, field string) ([]string, error) {
	var out []string
	err := p.list(n, field, func(e *yaml.Node, f string) error {
		s, err := p.str(e, f)
		if slices.Contains(out, s) {
			return p.errAt(e, "%s: %q is listed twice", f, s)
		}
		out = append(out, s)
		return err
	})
	return out, err
}

// secret reads a secret from the environment variable or file n names (kind "env" or
// "file"); the value is never in an error.
func (p *parser) secret(n *yaml.Node, field, kind string) (string, error) {
	ref, err := p.str(n, field)
	if err != nil {
		return "", err
	}
	if kind == "env" {
		v, ok := p.env(ref)
		if !ok || strings.TrimSpace(v) == "" {
			return "", p.errAt(n, "%s: environment variable %s is not set or empty: export it before rbook serve", field, ref)
		}
		return strings.TrimSpace(v), nil
	}
	b, err := os.ReadFile(ref)
	if err != nil {
		return "", p.errAt(n, "%s: %v", field, err)
	}
	v := strings.TrimSpace(string(b))
	if v == "" {
		return "", p.errAt(n, "%s: %s is empty", field, ref)
	}
	return v, nil
}

var channelNameRE = lazyregexp.New(`^[a-z0-9][a-z0-9_-]{0,63}$`)

// channelFields are the fields each kind takes besides name and kind.
var channelFields = map[string][]string{
	"webhook": {"url", "secret_env", "secret_file", "previous_secret_env", "previous_secret_file"},
	"teams":   {"url_env", "url_file"},
	"email":   {"smtp", "from", "to", "to_requester", "username", "password_env", "password_file"},
	"slack":   {"channel", "bot_token_env", "bot_token_file", "signing_secret_env", "signing_secret_file", "api_url"},
}

func (p *parser) channel(n *yaml.Node, field string) (Channel, string, error) {
	vals := map[string]*yaml.Node{}
	all := []string{"name", "kind", "secret", "password"}
	for _, f := range channelFields {
		all = append(all, f...)
	}
	fields := map[string]func(v *yaml.Node, field string) error{}
	for _, f := range all {
		fields[f] = func(v *yaml.Node, _ string) error { vals[f] = v; return nil }
	}
	if err := p.mapping(n, field+".", fields); err != nil {
		return nil, "", err
	}
	for _, inline := range []string{"secret", "password"} {
		if v := vals[inline]; v != nil {
			return nil, "", p.errAt(v, "%s.%s: secrets are not written in the config: use %s_env (an environment variable) or %s_file", field, inline, inline, inline)
		}
	}
	if vals["name"] == nil || vals["kind"] == nil {
		return nil, "", p.errAt(n, "%s: a channel needs name and kind", field)
	}
	name, err := p.str(vals["name"], field+".name")
	if err != nil {
		return nil, "", err
	}
	if !channelNameRE.MatchString(name) {
		return nil, "", p.errAt(vals["name"], "%s.name: %q: use 1-64 of a-z 0-9 _ - (it names the channel in routes and in the delivery records)", field, name)
	}
	kind, err := p.str(vals["kind"], field+".kind")
	if err != nil {
		return nil, "", err
	}
	allowed, ok := channelFields[kind]
	if !ok {
		return nil, "", p.errAt(vals["kind"], "%s.kind: %q: want webhook, teams, email or slack", field, kind)
	}
	for f, v := range vals {
		if f != "name" && f != "kind" && !slices.Contains(allowed, f) {
			return nil, "", p.errAt(v, "%s.%s: not a field of a %s channel (fields: %s)", field, f, kind, strings.Join(allowed, ", "))
		}
	}
	// oneOf reads the secret of exactly one of the fields a and b (env, file).
	oneOf := func(a, b string) (string, error) {
		switch {
		case vals[a] != nil && vals[b] != nil:
			return "", p.errAt(vals[b], "%s: give %s or %s, not both", field, a, b)
		case vals[a] != nil:
			return p.secret(vals[a], field+"."+a, "env")
		case vals[b] != nil:
			return p.secret(vals[b], field+"."+b, "file")
		}
		return "", p.errAt(n, "%s: a %s channel needs %s or %s", field, kind, a, b)
	}
	switch kind {
	case "webhook":
		if vals["url"] == nil {
			return nil, "", p.errAt(n, "%s: a webhook channel needs url", field)
		}
		u, err := p.httpURL(vals["url"], field+".url")
		if err != nil {
			return nil, "", err
		}
		secret, err := oneOf("secret_env", "secret_file")
		if err != nil {
			return nil, "", err
		}
		w, err := NewWebhook(name, u, secret)
		if err != nil {
			return nil, "", p.errAt(cmp.Or(vals["secret_env"], vals["secret_file"]), "%s: %v", field, err)
		}
		if vals["previous_secret_env"] != nil || vals["previous_secret_file"] != nil {
			// While the signing secret is rotated: a second signature with the old one.
			prev, err := oneOf("previous_secret_env", "previous_secret_file")
			if err != nil {
				return nil, "", err
			}
			if err := w.SetPrevious(prev); err != nil {
				return nil, "", p.errAt(cmp.Or(vals["previous_secret_env"], vals["previous_secret_file"]), "%s: previous secret: %v", field, err)
			}
		}
		return w, name, nil
	case "teams":
		raw, err := oneOf("url_env", "url_file")
		if err != nil {
			return nil, "", err
		}
		at := vals["url_env"]
		if at == nil {
			at = vals["url_file"]
		}
		u, err := url.Parse(raw)
		if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
			return nil, "", p.errAt(at, "%s: the Teams workflow URL is not an http(s) URL: copy it from the workflow's \"When a Teams webhook request is received\" trigger", field)
		}
		return &Teams{name: name, url: raw}, name, nil
	case "slack":
		ch, err := p.slackChannel(n, field, name, vals, oneOf)
		return ch, name, err
	default: // email
		e := &Email{name: name}
		if v := vals["to_requester"]; v != nil {
			if v.Kind != yaml.ScalarNode || v.ShortTag() != "!!bool" {
				return nil, "", p.errAt(v, "%s.to_requester: want true or false", field)
			}
			e.toRequester = strings.EqualFold(v.Value, "true")
		}
		if v := vals["to_approvers"]; v != nil {
			if v.Kind != yaml.ScalarNode || v.ShortTag() != "!!bool" {
				return nil, "", p.errAt(v, "%s.to_approvers: want true or false", field)
			}
			e.toApprovers = strings.EqualFold(v.Value, "true")
		}
		for _, f := range []string{"smtp", "from", "to"} {
			if vals[f] == nil && (f != "to" || !e.toRequester && !e.toApprovers) {
				return nil, "", p.errAt(n, "%s: an email channel needs smtp, from and to (or to_requester: true or to_approvers: true)", field)
			}
		}
		if e.addr, err = p.str(vals["smtp"], field+".smtp"); err != nil {
			return nil, "", err
		}
		if !strings.Contains(e.addr, ":") {
			return nil, "", p.errAt(vals["smtp"], "%s.smtp: %q: want host:port (e.g. smtp.example.com:587)", field, e.addr)
		}
		from, err := p.str(vals["from"], field+".from")
		if err != nil {
			return nil, "", err
		}
		if _, err := mail.ParseAddress(from); err != nil {
			return nil, "", p.errAt(vals["from"], "%s.from: %q is not an email address", field, from)
		}
		e.from = from
		if vals["to"] != nil {
			if e.to, err = p.strs(vals["to"], field+".to"); err != nil {
				return nil, "", err
			}
		}
		for i, a := range e.to {
			if _, err := mail.ParseAddress(a); err != nil {
				return nil, "", p.errAt(vals["to"].Content[i], "%s.to[%d]: %q is not an email address", field, i, a)
			}
		}
		if v := vals["username"]; v != nil {
			if e.username, err = p.str(v, field+".username"); err != nil {
				return nil, "", err
			}
			if e.password, err = oneOf("password_env", "password_file"); err != nil {
				return nil, "", err
			}
		}
		return e, name, nil
	}
}

func (p *parser) httpURL(n *yaml.Node, field string) (string, error) {
	s, err := p.str(n, field)
	if err != nil {
		return "", err
	}
	u, err := url.Parse(s)
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" || u.User != nil {
		return "", p.errAt(n, "%s: %q is not an http(s) URL without credentials", field, s)
	}
	return s, nil
}

func (p *parser) route(n *yaml.Node, field string) (Route, error) {
	r := Route{Line: n.Line}
	globField := func(dst *string) func(v *yaml.Node, f string) error {
		return func(v *yaml.Node, f string) error {
			s, err := p.str(v, f)
			if err != nil {
				return err
			}
			if _, err := path.Match(s, ""); err != nil {
				return p.errAt(v, "%s: %q is not a glob (path.Match syntax: * ? [a-z])", f, s)
			}
			*dst = s
			return nil
		}
	}
	var chNode *yaml.Node
	err := p.mapping(n, field+".", map[string]func(v *yaml.Node, f string) error{
		"runbook":     globField(&r.Runbook),
		"environment": globField(&r.Environment),
		"repository":  globField(&r.Repository),
		"events": func(v *yaml.Node, f string) error {
			var err error
			if r.Events, err = p.strs(v, f); err != nil {
				return err
			}
			for i, e := range r.Events {
				if !slices.Contains(store.EventKinds, e) {
					return p.errAt(v.Content[i], "%s[%d]: %q is not an event (events: %s)", f, i, e, strings.Join(store.EventKinds, ", "))
				}
			}
			return nil
		},
		"channels": func(v *yaml.Node, f string) error {
			chNode = v
			var err error
			r.Channels, err = p.strs(v, f)
			return err
		},
		"escalate": func(v *yaml.Node, f string) error {
			return p.list(v, f, func(n *yaml.Node, f string) error {
				step, err := p.escalation(n, f)
				if err != nil {
					return err
				}
				if k := len(r.Escalate); k > 0 && step.After <= r.Escalate[k-1].After {
					return p.errAt(n, "%s.after: %s is not after the previous step's %s: list steps by increasing delay", f, step.After, r.Escalate[k-1].After)
				}
				r.Escalate = append(r.Escalate, step)
				return nil
			})
		},
	})
	if err != nil {
		return r, err
	}
	if len(r.Escalate) > 0 && len(r.Events) > 0 && !slices.Contains(r.Events, store.EventGateOpened) {
		return r, p.errAt(n, "%s.escalate: the route does not send gate.opened, so no gate it routes could escalate: add gate.opened to its events", field)
	}
	if chNode == nil || len(r.Channels) == 0 {
		return r, p.errAt(n, "%s: a route needs channels (a list of channel names)", field)
	}
	r.Line = chNode.Line
	return r, nil
}

// MaxEscalationDelay bounds an escalation step's delay (a gate's deadline is at most days).
const MaxEscalationDelay = 30 * 24 * time.Hour

func (p *parser) escalation(n *yaml.Node, field string) (EscalationStep, error) {
	step := EscalationStep{Line: n.Line}
	var after *yaml.Node
	err := p.mapping(n, field+".", map[string]func(v *yaml.Node, f string) error{
		"after": func(v *yaml.Node, f string) error {
			after = v
			s, err := p.str(v, f)
			if err != nil {
				return err
			}
			d, err := time.ParseDuration(s)
			if err != nil || d <= 0 || d > MaxEscalationDelay {
				return p.errAt(v, "%s: %q: want a duration such as 30m or 2h, above 0 and at most %s", f, s, MaxEscalationDelay)
			}
			step.After = d
			return nil
		},
		"channels": func(v *yaml.Node, f string) error {
			var err error
			step.Channels, err = p.strs(v, f)
			step.Line = v.Line
			return err
		},
		"notify": func(v *yaml.Node, f string) error {
			var err error
			step.Notify, err = approval.ParseNotify(v, f, p.errAt)
			step.NotifyLine, step.notifyField = v.Line, f
			return err
		},
	})
	if err != nil {
		return step, err
	}
	if after == nil || len(step.Channels) == 0 {
		return step, p.errAt(n, "%s: an escalation step needs after (a duration) and channels (and may name people to mail: notify)", field)
	}
	return step, nil
}
