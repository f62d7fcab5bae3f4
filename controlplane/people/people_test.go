package people

import (
	"strings"
	"testing"
)

func TestDirectoryLinksEveryIdentityOfAPerson(t *testing.T) {
	d, err := Load("testdata/people.yaml")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ identity, want string }{
		{"alice", "alice"},
		{"github:alice-gh", "alice"},
		{"github:ALICE-gh", "alice"},
		{"slack:T0123ABCD/U0456EFGH", "alice"},
		{"oidc:alice@example.com", "alice"},
		{"oidc:Alice@Example.COM", "alice"},
		{"bob", "bob"},
		{"oidc:bob-sub-123", "bob"},
		{"oidc:BOB-sub-123", ""},
		{"slack:T0123ABCD/U999", ""},
		{"carol", ""},
		{"unverified:alice", ""},
	} {
		per, ok := d.PersonOf(c.identity)
		if got := per.ID; got != c.want || ok != (c.want != "") {
			t.Errorf("PersonOf(%q) = %q, %v; want %q", c.identity, got, ok, c.want)
		}
	}
	a, _ := d.ByID("alice")
	if a.Label() != "Alice Example" || strings.Join(a.Groups, ",") != "sre,leads" || a.Where != "testdata/people.yaml:3" {
		t.Errorf("alice = %+v", a)
	}
	if a.Email() != "alice@example.com" {
		t.Errorf("alice's Email() = %q, want alice@example.com", a.Email())
	}
	if b, _ := d.ByID("bob"); b.Email() != "" {
		t.Errorf("bob's Email() = %q, want none", b.Email())
	}
	if !d.HasGroup("sre") || d.HasGroup("dba") {
		t.Errorf("HasGroup(sre), HasGroup(dba) = %v, %v; want true, false", d.HasGroup("sre"), d.HasGroup("dba"))
	}
}

func TestNotLinkedMessageSaysWhatToAdd(t *testing.T) {
	got := NotLinkedMessage("slack:T0123ABCD/U999")
	for _, want := range []string{"slack:T0123ABCD/U999", `add "slack:T0123ABCD/U999" to your entry in the people file`, "not counted"} {
		if !strings.Contains(got, want) {
			t.Errorf("NotLinkedMessage = %q, want it to contain %q", got, want)
		}
	}
}

func TestNilDirectoryHasNobody(t *testing.T) {
	var d *Directory
	if _, ok := d.PersonOf("alice"); ok {
		t.Error("a nil directory found a person")
	}
}

func TestPeopleFileErrorsNameFileLineAndField(t *testing.T) {
	for _, c := range []struct{ name, yaml, want string }{
		{"one identity under two people", "people:\n  - id: alice\n    identities: [github:al]\n  - id: al\n    identities:\n      - github:AL\n",
			`people.yaml:6: people[1] (al).identities: "github:al" already belongs to person alice at people.yaml:3`},
		{"an address and its OIDC identity under two people", "people:\n  - id: a\n    identities: [\"email:x@example.com\"]\n  - id: b\n    identities: [\"oidc:x@example.com\"]\n",
			`people.yaml:5: people[1] (b).identities: "oidc:x@example.com" already belongs to person a at people.yaml:3`},
		{"unknown top-level key", "people:\n  - id: a\n    identities: [a]\nteams: {}\n", `people.yaml:4: teams: unknown field`},
		{"unknown person key", "people:\n  - id: a\n    mail: a@example.com\n    identities: [a]\n", `people.yaml:3: people[0]: unknown field "mail"`},
		{"bad identity kind", "people:\n  - id: a\n    identities: [\"teams:a\"]\n", `people.yaml:3: people[0] (a).identities: "teams:a" is not an identity`},
		{"bad slack identity", "people:\n  - id: a\n    identities: [\"slack:U1\"]\n", `people.yaml:3: people[0] (a).identities: "slack:U1": want slack:<team id>/<user id>`},
		{"bad GitHub login", "people:\n  - id: a\n    identities: [\"github:-x\"]\n", `people.yaml:3: people[0] (a).identities: "github:-x": not a GitHub login`},
		{"reserved auth-file name", "people:\n  - id: a\n    identities: [system]\n", `people.yaml:3: people[0] (a).identities: "system" is not an auth-file identity`},
		{"identity listed twice", "people:\n  - id: a\n    identities: [a, a]\n", `people.yaml:3: people[0] (a).identities: "a" is listed twice`},
		{"duplicate person id", "people:\n  - id: a\n    identities: [a]\n  - id: a\n    identities: [b]\n", `people.yaml:4: people[1] (a).id: "a" is also the id of the person at people.yaml:2`},
		{"no identities", "people:\n  - id: a\n", `people.yaml:2: people[0] (a).identities: want a list of at least one identity`},
		{"missing id", "people:\n  - identities: [a]\n", `people.yaml:2: people[0].id: missing`},
		{"bad id", "people:\n  - id: a b\n    identities: [a]\n", `people.yaml:2: people[0].id: "a b" is not a person id`},
		{"group names a stranger", "people:\n  - id: a\n    identities: [a]\ngroups:\n  sre: [a, zed]\n", `people.yaml:5: groups.sre: "zed" is not the id of a person of this file`},
		{"duplicate key", "people:\n  - id: a\n    id: b\n    identities: [a]\n", `people.yaml:3: id: duplicate key (first on line 2)`},
		{"alias", "people:\n  - &p {id: a, identities: [a]}\n  - *p\n", `people.yaml:2: anchors and aliases are not allowed`},
		{"syntax error", "people:\n  - id: a\n   identities: [a]\n", `people.yaml:2: did not find expected`},
		{"no people", "groups: {}\n", `people.yaml:1: people: no people listed`},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := Parse([]byte(c.yaml), "people.yaml")
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("Parse error = %v\nwant it to contain %s", err, c.want)
			}
		})
	}
}

func TestAuthFileGitHubLinkIsThePerson(t *testing.T) {
	d, err := Load("testdata/people.yaml")
	if err != nil {
		t.Fatal(err)
	}
	err = d.LinkAuth([]AuthLink{
		{Identity: "bob", GitHubLogin: "bob-gh", Where: "auth.txt:1"},        // bob's person gains github:bob-gh
		{Identity: "carol", GitHubLogin: "Carol", Where: "auth.txt:2"},       // nobody: carol becomes a person
		{Identity: "alice-ci", GitHubLogin: "alice-gh", Where: "auth.txt:3"}, // alice's person gains alice-ci
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ identity, want string }{
		{"github:bob-gh", "bob"}, {"carol", "carol"}, {"github:carol", "carol"}, {"alice-ci", "alice"},
	} {
		if per, _ := d.PersonOf(c.identity); per.ID != c.want {
			t.Errorf("PersonOf(%q) = %q, want %q", c.identity, per.ID, c.want)
		}
	}
	if c, _ := d.ByID("carol"); c.Where != "auth.txt:2" {
		t.Errorf("carol's person comes from %q, want auth.txt:2", c.Where)
	}
}

func TestAuthFileLinkErrorsNameBothLines(t *testing.T) {
	for _, c := range []struct {
		name string
		link AuthLink
		want string
	}{
		{"github= of another person", AuthLink{Identity: "bob", GitHubLogin: "alice-gh", Where: "auth.txt:4"},
			"auth.txt:4: bob has github=alice-gh, but bob is person bob (testdata/people.yaml:12) and github:alice-gh is person alice (testdata/people.yaml:7)"},
		{"a person's id is another auth-file identity", AuthLink{Identity: "leads-bot", Where: "auth.txt:2"}, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			d, err := Load("testdata/people.yaml")
			if err != nil {
				t.Fatal(err)
			}
			err = d.LinkAuth([]AuthLink{c.link})
			if c.want == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("LinkAuth error = %v\nwant %s", err, c.want)
			}
		})
	}
	d, _ := Parse([]byte("people:\n  - id: ops\n    identities: [github:ops-lead]\n"), "people.yaml")
	err := d.LinkAuth([]AuthLink{{Identity: "ops", Where: "auth.txt:9"}})
	if err == nil || !strings.Contains(err.Error(), `auth.txt:9: auth-file identity "ops" is also the id of person ops at people.yaml:2, who does not list it`) {
		t.Fatalf("LinkAuth error = %v, want the clash of person id and auth-file identity", err)
	}
}
