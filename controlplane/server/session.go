package server

import (
	"context"
	"net"
	"net/http"
	"net/netip"
	"strings"

	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/rbookhq/rbook-action/controlplane/signin"
	"github.com/rbookhq/rbook-action/controlplane/store"
	rbookv1 "github.com/rbookhq/rbook-action/gen/rbook/v1"
)

// The console's side of the server (docs/console-signin.md): the session cookie as a
// credential, the person at the keyboard of a laptop run, cross-origin protection and
// IdentityService.WhoAmI.

// transport is what the HTTP layer knows of a request that the Connect interceptors do not
// see: whether it came over TLS (which session cookie name applies), and, with
// Options.ClientCAs, its TLS client certificate: the identity of a verified one, or why the
// one presented was refused.
type transport struct {
	tls          bool
	certIdentity string
	certErr      error
}

type transportKey struct{}

func transportOf(ctx context.Context) transport {
	t, _ := ctx.Value(transportKey{}).(transport)
	return t
}

// sessionKey holds the store.Session of a caller signed in with a console session.
type sessionKey struct{}

func sessionFrom(ctx context.Context) (store.Session, bool) {
	s, ok := ctx.Value(sessionKey{}).(store.Session)
	return s, ok
}

// sessionCaller is the Caller of a console session: approver or viewer, never executor.
func sessionCaller(s store.Session) Caller {
	role := RoleViewer
	if s.Role == string(RoleApprover) {
		role = RoleApprover
	}
	return Caller{Identity: s.Identity, Role: role, Groups: s.Groups, GitHubLogin: s.GitHubLogin}
}

// localPersonKey holds the OS user name of the person at the keyboard (Options.LocalPerson)
// on a request a browser on this machine made to the embedded control plane.
type localPersonKey struct{}

func localPerson(ctx context.Context) string {
	p, _ := ctx.Value(localPersonKey{}).(string)
	return p
}

// loopbackHost reports whether a Host header names a loopback address (127.0.0.0/8, ::1 or
// localhost), with or without a port.
func loopbackHost(host string) bool {
	h, _, err := net.SplitHostPort(host)
	if err != nil {
		h = strings.Trim(host, "[]")
	}
	if strings.EqualFold(h, "localhost") {
		return true
	}
	ip, err := netip.ParseAddr(h)
	return err == nil && ip.Unmap().IsLoopback()
}

// buildHandler is the server's outermost handler. Cross-origin requests that change state are
// refused by http.CrossOriginProtection (403), whatever the path: Connect endpoints and
// /auth/* alike; clients that are not browsers send neither Origin nor Sec-Fetch-Site and
// pass. On a control plane with a local person (the embedded one of `rbook run`), a Host
// header that is not a loopback address is refused (a DNS rebinding page cannot reach it),
// and a same-origin browser request from a loopback peer is the person at the keyboard.
func (s *Server) buildHandler() http.Handler {
	inner := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		t := transport{tls: r.TLS != nil}
		if s.certs != nil {
			t.certIdentity, t.certErr = s.certs.identity(r)
			if t.certErr != nil && !strings.HasPrefix(r.URL.Path, "/rbook.v1.") {
				// The rbook.v1 services refuse it with a Connect error (the auth interceptor).
				http.Error(w, t.certErr.Error(), http.StatusUnauthorized)
				return
			}
		}
		ctx := context.WithValue(r.Context(), transportKey{}, t)
		if s.opts.LocalPerson != "" && s.opts.Auth == nil {
			if !loopbackHost(r.Host) {
				http.Error(w, "this control plane answers only at its loopback address (http://127.0.0.1:PORT)", http.StatusForbidden)
				return
			}
			if loopbackPeer(r.RemoteAddr) && r.Header.Get("Sec-Fetch-Site") == "same-origin" {
				ctx = context.WithValue(ctx, localPersonKey{}, s.opts.LocalPerson)
			}
		}
		s.mux.ServeHTTP(w, r.WithContext(ctx))
	})
	cop := http.NewCrossOriginProtection()
	cop.SetDenyHandler(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		http.Error(w, "cross-origin request refused: the console and its API accept changes only from their own origin", http.StatusForbidden)
	}))
	return cop.Handler(inner)
}

// identityService implements rbook.v1.IdentityService.
type identityService struct{ s *Server }

// WhoAmI says who the control plane takes the caller for (identity_service.proto). The auth
// interceptor lets it through without credentials.
func (h identityService) WhoAmI(ctx context.Context, _ *rbookv1.WhoAmIRequest) (*rbookv1.WhoAmIResponse, error) {
	s := h.s
	res := &rbookv1.WhoAmIResponse{AuthEnabled: s.opts.Auth != nil, PublicUrl: strings.TrimRight(s.opts.PublicURL, "/")}
	if s.signin != nil {
		for _, p := range s.signin.Providers() {
			res.SignInProviders = append(res.SignInProviders, &rbookv1.SignInProvider{Id: p.ID, Label: p.Label, Kind: p.Kind})
		}
	}
	if c, ok := CallerFrom(ctx); ok {
		res.Identity, res.DisplayName, res.Roles = c.Identity, c.Identity, []string{string(c.Role)}
		if per, ok := s.people.PersonOf(c.Identity); ok {
			res.Person, res.PersonName = per.ID, per.Name
		}
		switch sess, isSession := sessionFrom(ctx); {
		case isSession:
			res.Method, res.SessionExpiresAt = "session", timestamppb.New(sess.ExpiresAt)
			if sess.DisplayName != "" {
				res.DisplayName = sess.DisplayName
			}
		case c.GitHub != nil:
			res.Method = "oidc"
		default:
			res.Method = "token"
		}
		return res, nil
	}
	if p := localPerson(ctx); p != "" {
		res.Identity, res.DisplayName, res.Method = unverifiedPrefix+p, p, "local"
		res.Roles = []string{string(RoleApprover)}
	}
	return res, nil
}

// sessionHandler builds the /auth/ handler: token sign-in with the auth file's approver
// and viewer tokens, and Options.SignIn's providers. Nil when the server has neither.
func (s *Server) sessionHandler() (*signin.Handler, error) {
	a := s.opts.Auth
	if a == nil || (len(a.entries) == 0 && s.opts.SignIn == nil) {
		return nil, nil
	}
	var check func(string) (signin.Person, bool)
	if len(a.entries) > 0 {
		check = func(tok string) (signin.Person, bool) {
			if len(tok) > maxBearerBytes || !b64token.MatchString(tok) {
				return signin.Person{}, false
			}
			c, ok := a.lookup(tok)
			return signin.Person{Identity: c.Identity, Role: string(c.Role), Groups: c.Groups, GitHubLogin: c.GitHubLogin}, ok
		}
	}
	return signin.New(signin.Options{Store: s.st, Config: s.opts.SignIn, Secret: s.opts.Secret, PublicURL: s.opts.PublicURL,
		CheckToken: check, Logger: s.log})
}
