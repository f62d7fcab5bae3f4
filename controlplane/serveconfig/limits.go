package serveconfig

import (
	"fmt"
	"net/netip"
	"strings"

	"github.com/spf13/pflag"

	"github.com/rbookhq/rbook-action/controlplane/server"
)

// limitsFlags are rbook serve's rate-limit flags (docs/serve-config.md, "Limits").
type limitsFlags struct {
	webhook, slack, signIn, console server.Rate
	trustedProxies                  []string
}

// rateValue is a --rate-limit-* flag's value: a server.Rate as ParseRate reads it.
type rateValue struct{ r *server.Rate }

func (v rateValue) String() string { return v.r.String() }

func (v rateValue) Set(s string) error {
	r, err := server.ParseRate(s)
	if err != nil {
		return err
	}
	*v.r = r
	return nil
}

// Type is the value's name in --help and the type flagconfig checks a file's value against
// (a string).
func (rateValue) Type() string { return "rate" }

// JSONSchema is a rate's schema in docs/serve-config.schema.json.
func (rateValue) JSONSchema() map[string]any {
	return map[string]any{"type": "string", "pattern": `^(off|[0-9]+/(s|m|h))$`}
}

// add registers --rate-limit-webhook, --rate-limit-slack, --rate-limit-signin,
// --rate-limit-console and --trusted-proxies on fs, with server.DefaultLimits as defaults.
func (l *limitsFlags) add(fs *pflag.FlagSet) {
	d := server.DefaultLimits()
	l.webhook, l.slack, l.signIn, l.console = d.Webhook, d.Slack, d.SignIn, d.Console
	l.trustedProxies = nil
	const per = ": N/s, N/m or N/h (bursts of up to N), or off"
	fs.Var(rateValue{&l.webhook}, "rate-limit-webhook", "requests per client address to the GitHub App's webhook"+per)
	fs.Var(rateValue{&l.slack}, "rate-limit-slack", "requests per client address to Slack's interactions endpoint"+per)
	fs.Var(rateValue{&l.signIn}, "rate-limit-signin", "requests per client address to the console's sign-in (/auth/)"+per)
	fs.Var(rateValue{&l.console}, "rate-limit-console", "requests per client address for the console's pages and the calls browsers make"+per)
	fs.StringSliceVar(&l.trustedProxies, "trusted-proxies", nil, "comma-separated `CIDRs` of reverse proxies whose X-Forwarded-For header names the client for the rate limits (e.g. 10.0.0.0/8); without them the peer is the client")
}

// apply sets cfg.Limits from the flags. Errors: a --trusted-proxies entry that is
// neither a CIDR nor an IP address.
func (f *limitsFlags) apply(cfg *server.Config) error {
	l := server.Limits{Webhook: f.webhook, Slack: f.slack, SignIn: f.signIn, Console: f.console}
	for _, s := range f.trustedProxies {
		s = strings.TrimSpace(s)
		p, err := netip.ParsePrefix(s)
		if err != nil {
			a, aerr := netip.ParseAddr(s)
			if aerr != nil {
				return fmt.Errorf("--trusted-proxies: %q is neither a CIDR (10.0.0.0/8, fd00::/8) nor an IP address", s)
			}
			p = netip.PrefixFrom(a.Unmap(), a.Unmap().BitLen())
		}
		l.TrustedProxies = append(l.TrustedProxies, p.Masked())
	}
	cfg.Limits = &l
	return nil
}
