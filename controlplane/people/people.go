// Package people is the control plane's directory of people (rbook serve --people FILE;
// docs/people.md): each person links the identities one human decides gates under — an
// auth-file identity, "github:<login>", "slack:<team>/<user>", a console sign-in's
// "oidc:<value>" or "email:<address>" — so a gate's M-of-N counts people, not accounts, and
// four-eyes compares the person who votes with the person who started the run.
package people

import (
	"fmt"
	"io"
	"os"
	"slices"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/rbookhq/rbook-action/controlplane/yamlerr"
	"github.com/rbookhq/rbook-action/internal/lazyregexp"
)

// Directory limits.
const (
	// MaxFileBytes caps a people file (1 MiB, as every rbook YAML file).
	MaxFileBytes = 1 << 20
	// MaxPeople caps the people of one file.
	MaxPeople = 10000
	// MaxIdentities caps the identities of one person.
	MaxIdentities = 50
)

// Person is one human of the directory.
type Person struct {
	// ID names the person in votes, gate policies ("person:<id>") and groups: 1-64 of
	// A-Z a-z 0-9 . _ -.
	ID string
	// Name is the display name ("Alice Example"); "" when the file gives none.
	Name string
	// Identities are the person's identities as written (canonical spelling: GitHub logins
	// and email addresses lowercased).
	Identities []string
	// Groups are the directory groups the person belongs to, in file order.
	Groups []string
	// Where is "file:line" of the person's entry, or of the auth-file line that made it
	// (an auth-file identity with github=, linked to no person of the file).
	Where string
}

// Label is how a person is shown beside an identity: the display name, else the id.
func (p Person) Label() string {
	if p.Name != "" {
		return p.Name
	}
	return p.ID
}

// Email is the person's first "email:<address>" identity's address (lowercased), "" when
// the directory gives none: where an email notification to this person goes.
func (p Person) Email() string {
	for _, id := range p.Identities {
		if addr, ok := strings.CutPrefix(id, "email:"); ok {
			return addr
		}
	}
	return ""
}

// NotLinkedMessage is what a channel that refuses identities with no person (Slack) tells
// the person it refused: which identity it saw and how to get linked (docs/people.md,
// "Slack"). It names no secret.
func NotLinkedMessage(identity string) string {
	return fmt.Sprintf("Your account %s is not linked to a person on this rbook control plane, so your vote was not counted. "+
		"Ask its operator to add %q to your entry in the people file (rbook serve --people; see docs/people.md), then try again.", identity, identity)
}

// Directory maps identities to people. The zero value and a nil *Directory are empty: every
// identity is its own person.
type Directory struct {
	// File is the path the directory was loaded from ("" for an empty one).
	File   string
	people []*Person
	byID   map[string]*Person
	// byKey maps a canonical identity to its person, where to the line naming it.
	byKey  map[string]*Person
	where  map[string]string
	groups map[string]int // group name → line
}

// Empty returns a directory without people, to which LinkAuthIdentity can add the auth
// file's github= links.
func Empty() *Directory {
	return &Directory{byID: map[string]*Person{}, byKey: map[string]*Person{}, where: map[string]string{}, groups: map[string]int{}}
}

// Load reads a people file (see Parse). Errors: unreadable file, and Parse's.
func Load(file string) (*Directory, error) {
	f, err := os.Open(file)
	if err != nil {
		return nil, fmt.Errorf("people file: %w", err)
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, MaxFileBytes+1))
	if err != nil {
		return nil, fmt.Errorf("people file %s: %w", file, err)
	}
	return Parse(data, file)
}

// Parse reads the YAML of a people file; file names it in errors, which read
// "file:line: field: message". The shape:
//
//	people:
//	  - id: alice                          # 1-64 of A-Z a-z 0-9 . _ -
//	    name: Alice Example                # optional display name
//	    identities:
//	      - alice                          # an auth-file identity (rbook serve --auth-file)
//	      - github:alice-gh                # a GitHub login (sign-in, reviews, OIDC jobs' actor)
//	      - slack:T0123ABCD/U0456EFGH      # a Slack user: team id / user id
//	      - oidc:alice@example.com         # a console OIDC sign-in's identity, as signed in
//	      - email:alice@example.com        # an address; also matches oidc:<address>
//	groups:
//	  sre: [alice, bob]                    # names a gate policy's "group:sre" also matches
//
// It is strict: unknown or duplicate keys, aliases, non-core tags, a person without id or
// identities, a bad id or identity, two people with one id, one identity under two people
// (the error names both lines), and a group naming someone who is not a person are errors.
func Parse(data []byte, file string) (*Directory, error) {
	doc, err := yamlerr.DecodeOne(file, data, MaxFileBytes, "people file", `a mapping with "people:"`)
	if err != nil {
		return nil, err
	}
	p := parser{file: file}
	if err := p.check(doc); err != nil {
		return nil, err
	}
	d := Empty()
	d.File = file
	root := doc.Content[0]
	if root.Kind != yaml.MappingNode {
		return nil, p.errf(root, "", "a people file is a mapping with the keys people and groups")
	}
	var groupsNode *yaml.Node
	for i := 0; i < len(root.Content); i += 2 {
		k, v := root.Content[i], root.Content[i+1]
		switch k.Value {
		case "people":
			if err := p.people(d, v); err != nil {
				return nil, err
			}
		case "groups":
			groupsNode = v
		default:
			return nil, p.errf(k, k.Value, "unknown field (the fields are people and groups)")
		}
	}
	if len(d.people) == 0 {
		return nil, p.errf(root, "people", "no people listed")
	}
	if groupsNode != nil { // after people: a group names them
		if err := p.groups(d, groupsNode); err != nil {
			return nil, err
		}
	}
	return d, nil
}

type parser struct{ file string }

func (p parser) errf(n *yaml.Node, field, format string, args ...any) error {
	if field != "" {
		field += ": "
	}
	return fmt.Errorf("%s:%d: %s%s", p.file, n.Line, field, fmt.Sprintf(format, args...))
}

// check refuses aliases, anchors, non-core tags, non-string keys and duplicate keys.
func (p parser) check(n *yaml.Node) error {
	if n.Kind == yaml.AliasNode || n.Anchor != "" {
		return p.errf(n, "", "anchors and aliases are not allowed in a people file")
	}
	switch n.ShortTag() {
	case "!!str", "!!int", "!!float", "!!bool", "!!null", "!!map", "!!seq":
	default:
		if n.Kind != yaml.DocumentNode {
			return p.errf(n, "", "tag %s is not allowed (only the YAML core schema's)", n.Tag)
		}
	}
	if n.Kind == yaml.MappingNode {
		seen := map[string]int{}
		for i := 0; i < len(n.Content); i += 2 {
			k := n.Content[i]
			if k.Kind != yaml.ScalarNode || k.ShortTag() != "!!str" {
				return p.errf(k, "", "a key must be a plain string")
			}
			if prev, dup := seen[k.Value]; dup {
				return p.errf(k, k.Value, "duplicate key (first on line %d)", prev)
			}
			seen[k.Value] = k.Line
		}
	}
	for _, c := range n.Content {
		if err := p.check(c); err != nil {
			return err
		}
	}
	return nil
}

func (p parser) str(n *yaml.Node, field string) (string, error) {
	if n.Kind != yaml.ScalarNode || n.ShortTag() != "!!str" {
		return "", p.errf(n, field, "want a string")
	}
	if len(n.Value) > 256 {
		return "", p.errf(n, field, "longer than 256 bytes")
	}
	return n.Value, nil
}

func (p parser) people(d *Directory, list *yaml.Node) error {
	if list.Kind != yaml.SequenceNode {
		return p.errf(list, "people", "want a list of people (id, name, identities)")
	}
	if len(list.Content) > MaxPeople {
		return p.errf(list, "people", "%s, over the limit of %d", yamlerr.Plural(len(list.Content), "person", "people"), MaxPeople)
	}
	for i, n := range list.Content {
		field := fmt.Sprintf("people[%d]", i)
		if n.Kind != yaml.MappingNode {
			return p.errf(n, field, "want a mapping (id, name, identities)")
		}
		per := &Person{Where: fmt.Sprintf("%s:%d", p.file, n.Line)}
		var idents *yaml.Node
		for j := 0; j < len(n.Content); j += 2 {
			k, v := n.Content[j], n.Content[j+1]
			var err error
			switch k.Value {
			case "id":
				if per.ID, err = p.str(v, field+".id"); err == nil && !personIDRE.MatchString(per.ID) {
					err = p.errf(v, field+".id", "%q is not a person id (1-64 of A-Z a-z 0-9 . _ -)", per.ID)
				}
			case "name":
				per.Name, err = p.str(v, field+".name")
				if err == nil && strings.ContainsFunc(per.Name, func(r rune) bool { return r < 0x20 || r == 0x7f }) {
					err = p.errf(v, field+".name", "has a control character; give one line of text")
				}
			case "identities":
				idents = v
			default:
				err = p.errf(k, field, "unknown field %q (fields: id, name, identities)", k.Value)
			}
			if err != nil {
				return err
			}
		}
		if per.ID == "" {
			return p.errf(n, field+".id", "missing")
		}
		field = fmt.Sprintf("people[%d] (%s)", i, per.ID)
		if prev, dup := d.byID[per.ID]; dup {
			return p.errf(n, field+".id", "%q is also the id of the person at %s", per.ID, prev.Where)
		}
		if idents == nil || idents.Kind != yaml.SequenceNode || len(idents.Content) == 0 {
			at := n
			if idents != nil {
				at = idents
			}
			return p.errf(at, field+".identities", "want a list of at least one identity (alice, github:<login>, slack:<team>/<user>, oidc:<value>, email:<address>)")
		}
		if len(idents.Content) > MaxIdentities {
			return p.errf(idents, field+".identities", "%d identities, over the limit of %d", len(idents.Content), MaxIdentities)
		}
		d.add(per)
		for _, e := range idents.Content {
			s, err := p.str(e, field+".identities")
			if err != nil {
				return err
			}
			id, err := Canonical(s)
			if err != nil {
				return p.errf(e, field+".identities", "%v", err)
			}
			where := fmt.Sprintf("%s:%d", p.file, e.Line)
			if err := d.link(per, id, where); err != nil {
				return p.errf(e, field+".identities", "%v", err)
			}
		}
	}
	return nil
}

func (p parser) groups(d *Directory, n *yaml.Node) error {
	if n.Kind != yaml.MappingNode {
		return p.errf(n, "groups", "want a mapping of group name to a list of person ids")
	}
	for i := 0; i < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		field := "groups." + k.Value
		if !groupNameRE.MatchString(k.Value) {
			return p.errf(k, field, "%q is not a group name (1-64 of A-Z a-z 0-9 . _ -)", k.Value)
		}
		if v.Kind != yaml.SequenceNode || len(v.Content) == 0 {
			return p.errf(v, field, "want a list of at least one person id")
		}
		d.groups[k.Value] = k.Line
		for _, m := range v.Content {
			id, err := p.str(m, field)
			if err != nil {
				return err
			}
			per, ok := d.byID[id]
			if !ok {
				return p.errf(m, field, "%q is not the id of a person of this file", id)
			}
			if slices.Contains(per.Groups, k.Value) {
				return p.errf(m, field, "%q is listed twice", id)
			}
			per.Groups = append(per.Groups, k.Value)
		}
	}
	return nil
}

func (d *Directory) add(per *Person) {
	d.people = append(d.people, per)
	d.byID[per.ID] = per
}

// link adds the canonical identity id to per. Error: the identity (or, for an address and
// an OIDC identity, the other spelling of it: sameAs) already belongs to another person
// (naming where), or is listed twice for per.
func (d *Directory) link(per *Person, id, where string) error {
	for _, key := range sameAs(id) {
		if prev, taken := d.byKey[key]; taken {
			if prev == per && key == id {
				return fmt.Errorf("%q is listed twice (first at %s)", id, d.where[key])
			}
			if prev != per {
				return fmt.Errorf("%q already belongs to person %s at %s; one identity is one person's", id, prev.ID, d.where[key])
			}
		}
	}
	d.byKey[id], d.where[id] = per, where
	per.Identities = append(per.Identities, id)
	return nil
}

// Identity syntax (docs/people.md, "Identities").
var (
	personIDRE    = lazyregexp.New(`^[A-Za-z0-9._-]{1,64}$`)
	groupNameRE   = lazyregexp.New(`^[A-Za-z0-9._-]{1,64}$`)
	githubLoginRE = lazyregexp.New(`^[A-Za-z0-9](?:[A-Za-z0-9-]{0,38})$`)
	slackUserRE   = lazyregexp.New(`^[A-Z0-9]{1,32}/[A-Z0-9]{1,32}$`)
	emailRE       = lazyregexp.New(`^[^\s@,:]{1,64}@[A-Za-z0-9.-]{1,190}$`)
	authIdentRE   = lazyregexp.New(`^[^\s:,]{1,256}$`)
)

// reserved are names the control plane records for decisions nobody's token made; the auth
// file refuses them as identities.
var reserved = map[string]bool{"system": true, "policy": true, "anonymous": true}

// Canonical checks an identity of a people file and returns its canonical spelling (GitHub
// logins and email addresses lowercased). The kinds: a plain auth-file identity ("alice"),
// "github:<login>", "slack:<team id>/<user id>", "oidc:<value>" (a console OIDC sign-in's
// identity) and "email:<address>". Error: what is wrong and the accepted forms.
func Canonical(s string) (string, error) {
	kind, v, colon := strings.Cut(s, ":")
	if !colon {
		if !authIdentRE.MatchString(s) || reserved[s] {
			return "", fmt.Errorf("%q is not an auth-file identity (no spaces, commas or colons; not system, policy or anonymous)", s)
		}
		return s, nil
	}
	switch kind {
	case "github":
		if !githubLoginRE.MatchString(v) {
			return "", fmt.Errorf("%q: not a GitHub login (1-39 letters, digits or -, not starting with -)", s)
		}
		return "github:" + strings.ToLower(v), nil
	case "slack":
		if !slackUserRE.MatchString(v) {
			return "", fmt.Errorf("%q: want slack:<team id>/<user id>, e.g. slack:T0123ABCD/U0456EFGH (Slack's ids, upper case)", s)
		}
		return s, nil
	case "oidc":
		if v == "" || len(v) > 200 || strings.ContainsAny(v, ", \t\r\n") {
			return "", fmt.Errorf("%q: want oidc:<value>, the identity a console OIDC sign-in gives (its email, sub or preferred_username)", s)
		}
		return s, nil
	case "email":
		if !emailRE.MatchString(v) {
			return "", fmt.Errorf("%q: want email:<address>, e.g. email:alice@example.com", s)
		}
		return "email:" + strings.ToLower(v), nil
	}
	return "", fmt.Errorf("%q is not an identity: want alice (auth file), github:<login>, slack:<team>/<user>, oidc:<value> or email:<address>", s)
}

// sameAs are the keys that name the same account as the canonical identity id: itself, and
// for "email:<address>" the sign-in identity "oidc:<address>" (and back, the address
// compared lowercased), so email:alice@example.com also matches a console OIDC sign-in whose
// identity is her address.
func sameAs(id string) []string {
	if v, ok := strings.CutPrefix(id, "email:"); ok {
		return []string{id, "oidc:" + v}
	}
	if v, ok := strings.CutPrefix(id, "oidc:"); ok {
		return []string{id, "email:" + strings.ToLower(v)}
	}
	return []string{id}
}

// lookupKeys are the keys an identity as the control plane records it may be found under:
// itself, with a GitHub login lowercased, and for "oidc:<value>" also "email:<value
// lowercased>".
func lookupKeys(identity string) []string {
	if v, ok := strings.CutPrefix(identity, "github:"); ok {
		return []string{"github:" + strings.ToLower(v)}
	}
	return sameAs(identity)
}

// PersonOf is the person an identity the control plane recorded belongs to ("alice",
// "github:Alice-GH", "slack:T1/U2", "oidc:alice@example.com"), and whether there is one.
// Channels that must not count an unlinked identity call it and refuse when ok is false:
// the Slack channel refuses a Slack user with no person and tells them how to get linked
// (docs/people.md, "Slack"). Every other channel counts an identity with no person as its
// own person. "unverified:<name>" never has a person. Safe on a nil *Directory.
func (d *Directory) PersonOf(identity string) (Person, bool) {
	if d == nil || strings.HasPrefix(identity, "unverified:") {
		return Person{}, false
	}
	for _, k := range lookupKeys(identity) {
		if per, ok := d.byKey[k]; ok {
			return *per, true
		}
	}
	return Person{}, false
}

// ByID is the person with id, and whether there is one. Safe on a nil *Directory.
func (d *Directory) ByID(id string) (Person, bool) {
	if d == nil {
		return Person{}, false
	}
	per, ok := d.byID[id]
	if !ok {
		return Person{}, false
	}
	return *per, true
}

// HasGroup reports whether the directory defines group name. Safe on a nil *Directory.
func (d *Directory) HasGroup(name string) bool {
	if d == nil {
		return false
	}
	_, ok := d.groups[name]
	return ok
}

// GroupMembers is the people of the directory's group name, in file order; nil when the
// group has none or is not defined. Safe on a nil *Directory.
func (d *Directory) GroupMembers(name string) []Person {
	if d == nil {
		return nil
	}
	var out []Person
	for _, per := range d.people {
		if slices.Contains(per.Groups, name) {
			out = append(out, *per)
		}
	}
	return out
}

// Len is the number of people, those the auth file's github= links made included.
func (d *Directory) Len() int {
	if d == nil {
		return 0
	}
	return len(d.people)
}

// AuthLink is one auth-file line, for LinkAuth: its identity, its github= login ("" for
// none) and "file:line".
type AuthLink struct {
	Identity, GitHubLogin, Where string
}

// LinkAuth folds the auth file into the directory, so there is one notion of who a person
// is. A line's github= login is the same person as its identity: when one of the two belongs
// to a person, the other is linked to that person; when neither does, a person named by
// the auth-file identity is added with both (Where = the auth-file line); when they belong
// to two people, that is an error naming both. And a person of the file whose id equals an
// auth-file identity must list that identity (else two humans would share one name in the
// tally). d must not be nil. Errors name the auth-file line and the people file's line.
func (d *Directory) LinkAuth(lines []AuthLink) error {
	for _, l := range lines {
		if per, ok := d.byID[l.Identity]; ok && !slices.Contains(per.Identities, l.Identity) {
			return fmt.Errorf("%s: auth-file identity %q is also the id of person %s at %s, who does not list it: add %q to that person's identities, or give the person another id",
				l.Where, l.Identity, per.ID, per.Where, l.Identity)
		}
		if l.GitHubLogin == "" {
			continue
		}
		gh := "github:" + strings.ToLower(l.GitHubLogin)
		pa, okA := d.byKey[l.Identity]
		pg, okG := d.byKey[gh]
		switch {
		case okA && okG && pa != pg:
			return fmt.Errorf("%s: %s has github=%s, but %s is person %s (%s) and %s is person %s (%s); link both to one person",
				l.Where, l.Identity, l.GitHubLogin, l.Identity, pa.ID, d.where[l.Identity], gh, pg.ID, d.where[gh])
		case okA && !okG:
			d.byKey[gh], d.where[gh] = pa, l.Where
			pa.Identities = append(pa.Identities, gh)
		case okG && !okA:
			d.byKey[l.Identity], d.where[l.Identity] = pg, l.Where
			pg.Identities = append(pg.Identities, l.Identity)
		case !okA && !okG:
			per := &Person{ID: l.Identity, Where: l.Where}
			d.add(per)
			_ = d.link(per, l.Identity, l.Where)
			_ = d.link(per, gh, l.Where)
		}
	}
	return nil
}
