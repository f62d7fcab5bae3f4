package store

import (
	"fmt"
	"net/url"
	"strings"

	"github.com/rbookhq/rbook-action/internal/lazyregexp"
)

// What Open, OpenReadOnly and `rbook serve --db` accept as a database
// (docs/decisions/store-dialects.md). The rules are strict because `POSTGRES://…`, a typo
// `postgress://…` and a libpq keyword/value string would otherwise each be taken for a SQLite
// path: a file named after the DSN, its password printed:
//
//   - a URL whose scheme is postgres or postgresql, in any letter case: PostgreSQL;
//   - a libpq keyword/value string (`host=h port=5432 dbname=db user=u`): every
//     whitespace-separated word is key=value (a value may be single-quoted) and at least one
//     key is in libpqKeys: PostgreSQL (pgx parses it);
//   - any other value with a scheme (`letters://`): refused by CheckDSN with
//     ErrInvalidArgument; nothing is created;
//   - anything else: a SQLite file path.

// libpqKeys are the libpq connection keywords that make a key=value string a PostgreSQL DSN
// (a subset of libpq's list: those a person writes).
var libpqKeys = map[string]bool{
	"host": true, "hostaddr": true, "port": true, "dbname": true, "user": true, "password": true,
	"passfile": true, "sslmode": true, "sslrootcert": true, "sslcert": true, "sslkey": true,
	"sslpassword": true, "connect_timeout": true, "application_name": true, "options": true,
	"target_session_attrs": true, "service": true, "channel_binding": true,
}

// dsnScheme matches a value that starts with a URL scheme and "://".
var dsnScheme = lazyregexp.New(`^([A-Za-z][A-Za-z0-9+.-]*)://`)

// kvWord is one key=value word of a libpq keyword/value string: the key, "=" with optional
// spaces around it, and a single-quoted value (backslash escapes) or one without spaces.
var kvWord = lazyregexp.New(`^\s*([A-Za-z_]+)\s*=\s*('(?:[^'\\]|\\.)*'|[^\s']*)`)

// kvPassword finds the value of password= in a keyword/value string, for RedactDSN.
var kvPassword = lazyregexp.New(`(?i)(\b(?:ssl)?password\s*=\s*)('(?:[^'\\]|\\.)*'|[^\s']*)`)

// schemeOf is dsn's URL scheme in lower case, or "" when dsn does not start with one.
func schemeOf(dsn string) string {
	if m := dsnScheme.FindStringSubmatch(dsn); m != nil {
		return strings.ToLower(m[1])
	}
	return ""
}

// isKeywordValueDSN reports whether dsn is a libpq keyword/value string (see above).
func isKeywordValueDSN(dsn string) bool {
	rest, known := dsn, false
	for strings.TrimSpace(rest) != "" {
		m := kvWord.FindStringSubmatch(rest)
		if m == nil {
			return false
		}
		if libpqKeys[strings.ToLower(m[1])] {
			known = true
		}
		rest = rest[len(m[0]):]
		if rest != "" && !strings.ContainsAny(rest[:1], " \t\n") {
			return false // "a=b=c" or "a=b'c": not a word boundary
		}
	}
	return known
}

// IsPostgresDSN reports whether dsn names a PostgreSQL database for Open and OpenReadOnly: a
// postgres:// or postgresql:// URL (scheme in any letter case) or a libpq keyword/value
// string (docs/decisions/store-dialects.md). Anything else is a SQLite path, or refused
// by CheckDSN when it has another scheme.
func IsPostgresDSN(dsn string) bool {
	switch schemeOf(dsn) {
	case "postgres", "postgresql":
		return true
	case "":
		return isKeywordValueDSN(dsn)
	}
	return false
}

// CheckDSN refuses a database value that is neither a SQLite path nor a PostgreSQL DSN: one
// with another scheme ("postgress://…", "mysql://…", "file://…"), with ErrInvalidArgument and
// a message listing what is accepted. The message names the scheme only (never the value,
// which may hold a password). nil for everything Open accepts as a path or DSN (see the rules above).
func CheckDSN(dsn string) error {
	if sc := schemeOf(dsn); sc != "" && sc != "postgres" && sc != "postgresql" {
		return fmt.Errorf("%w: %q is not a database this rbook opens: give a SQLite file path, a postgres://… or postgresql://… URL, "+
			"or a PostgreSQL key=value string (host=… dbname=… user=…)", ErrInvalidArgument, sc+"://")
	}
	return nil
}

// pgConnString is a PostgreSQL dsn as pgx parses it: a URL's scheme in lower case (pgx
// accepts only postgres:// and postgresql:// as written); a keyword/value string as it is.
func pgConnString(dsn string) string {
	if sc := schemeOf(dsn); sc != "" {
		return sc + dsn[len(sc):]
	}
	return dsn
}

// RedactDSN is dsn with its passwords replaced by "xxxxx" (in a URL's userinfo and its
// password= and sslpassword= parameters, and in a keyword/value string's password= and
// sslpassword=), for errors and logs
// (docs/decisions/store-dialects.md: a DSN's password is never printed). Any value with a scheme is treated as a URL
// (a refused "postgress://u:pw@h" is redacted too); one that does not parse is reduced to
// its scheme. A SQLite path is returned as it is.
func RedactDSN(dsn string) string {
	sc := schemeOf(dsn)
	if sc == "" {
		if isKeywordValueDSN(dsn) {
			return kvPassword.ReplaceAllString(dsn, "${1}xxxxx")
		}
		return dsn
	}
	u, err := url.Parse(pgConnString(dsn))
	if err != nil {
		return sc + "://(unparseable DSN)"
	}
	// password, and sslpassword (the passphrase of the sslkey file).
	if q := u.Query(); q.Has("password") || q.Has("sslpassword") {
		for _, k := range []string{"password", "sslpassword"} {
			if q.Has(k) {
				q.Set(k, "xxxxx")
			}
		}
		u.RawQuery = q.Encode()
	}
	return u.Redacted()
}
