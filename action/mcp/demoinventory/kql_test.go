package demoinventory

import (
	"errors"
	"reflect"
	"slices"
	"strings"
	"testing"
)

func names(rows []Row) []string {
	var out []string
	for _, r := range rows {
		out = append(out, r["name"].(string))
	}
	slices.Sort(out)
	return out
}

func TestQueryFilters(t *testing.T) {
	tests := []struct {
		query string
		want  []string
	}{
		{"Resources", []string{"app-checkout", "app-checkout-dev", "app-legacy-api", "kv-checkout-prod", "sql-reporting-dev",
			"stcheckoutprod", "stscratchdev", "vm-build-01", "vm-web-01", "vm-web-02"}},
		{"resources | where name == 'vm-web-01'", []string{"vm-web-01"}},
		{"Resources | where name == 'VM-WEB-01'", nil},
		{"Resources | where name =~ 'VM-WEB-01'", []string{"vm-web-01"}},
		{`Resources | where type =~ "Microsoft.Web/sites" and properties.httpsOnly == false`, []string{"app-checkout-dev", "app-legacy-api"}},
		{"Resources | where type =~ 'microsoft.web/sites' and properties.httpsOnly != false", []string{"app-checkout"}},
		{"Resources | where properties.httpsOnly == 'false'", []string{"app-checkout-dev", "app-legacy-api"}},
		{"Resources | where isempty(tags.owner)", []string{"app-legacy-api", "stscratchdev"}},
		{"Resources | where isnotempty(tags.owner) and tags.env == 'dev'", []string{"app-checkout-dev", "sql-reporting-dev", "vm-build-01"}},
		{"Resources | where tags.owner != 'bob' and tags.env == 'prod'", []string{"app-legacy-api", "kv-checkout-prod", "vm-web-01", "vm-web-02"}},
		{"Resources | where tags.owner !~ 'BOB' and tags.owner !~ 'alice' and tags.env =~ 'PROD'", []string{"app-legacy-api", "kv-checkout-prod"}},
		{"Resources | where subscriptionId in~ ('SUB-DEMO-DEV') and type =~ 'microsoft.compute/virtualmachines'", []string{"vm-build-01"}},
		{"Resources | where location in ('northeurope', 'eastus') | where resourceGroup == 'rg-legacy-prod'", []string{"app-legacy-api"}},
		{"Resources | where location in ('NorthEurope')", nil},
		{"Resources | where properties.powerState == 'deallocated'", []string{"vm-web-02"}},
		{"Resources | where properties.nosuch == ''", []string{"app-checkout", "app-checkout-dev", "app-legacy-api", "kv-checkout-prod", "sql-reporting-dev",
			"stcheckoutprod", "stscratchdev", "vm-build-01", "vm-web-01", "vm-web-02"}},
		{"Resources | where name == 'it\\'s'", nil},
		{"Resources | where name == @'vm-web-01'", []string{"vm-web-01"}},
		{"Resources | project name, tags | where tags.owner == 'carol'", []string{"kv-checkout-prod"}},
		{"Resources\n| where tags.env == 'prod'\n| where properties.allowBlobPublicAccess == true", nil},
		{"Resources | where tags.env == 'dev' | where properties.allowBlobPublicAccess == true", []string{"stscratchdev"}},
	}
	for _, tt := range tests {
		t.Run(tt.query, func(t *testing.T) {
			q, err := Parse(tt.query)
			if err != nil {
				t.Fatalf("Parse: %v", err)
			}
			if got := names(q.Run(Resources())); !slices.Equal(got, tt.want) {
				t.Errorf("got %v, want %v", got, tt.want)
			}
		})
	}
}

func TestQueryProject(t *testing.T) {
	q, err := Parse("Resources | where name == 'app-legacy-api' | project name, tags.owner, properties.httpsOnly, tags")
	if err != nil {
		t.Fatal(err)
	}
	got := q.Run(Resources())
	want := []Row{{"name": "app-legacy-api", "tags_owner": nil, "properties_httpsOnly": false, "tags": map[string]any{"env": "prod"}}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got %#v\nwant %#v", got, want)
	}
	q, err = Parse("Resources | project tags_owner = tags.owner")
	if err == nil {
		t.Fatalf("renaming in project parsed as %v", q)
	}
}

func TestQueryDoesNotModifyInput(t *testing.T) {
	rows := Resources()
	q, err := Parse("Resources | where tags.env == 'prod' | project name")
	if err != nil {
		t.Fatal(err)
	}
	q.Run(rows)
	if !reflect.DeepEqual(rows, Resources()) {
		t.Error("Run modified its input rows")
	}
}

func TestQueryErrors(t *testing.T) {
	tests := []struct{ query, want string }{
		{"", "column 1: expected the table Resources at the start, found end of query (the demo inventory has only that table)"},
		{"AzureActivity | where a == 'b'", `column 1: expected the table Resources at the start, found "AzureActivity" (the demo inventory has only that table)`},
		{"Resources | summarize count() by type", `column 13: unsupported operator "summarize" (the demo supports where and project)`},
		{"Resources | project-away tags", `column 13: unsupported operator "project-away" (the demo supports where and project)`},
		{"Resources | where a == 'b' or c == 'd'", `column 19: unknown column "a" (available: id, location, name, properties, resourceGroup, subscriptionId, tags, type)`},
		{"Resources | where name == 'b' or name == 'd'", "column 31: unsupported: or (the demo supports and only; use in~ (...) for alternatives)"},
		{"Resources | where not(isempty(name))", "column 19: unsupported: not (use != or !~)"},
		{"Resources | where (name == 'x')", "column 19: unsupported: parentheses around conditions"},
		{"Resources | where name contains 'web'", `column 24: unsupported comparison "contains" (the demo supports ==, !=, =~, !~, in, in~)`},
		{"Resources | where name > 'a'", `column 24: unsupported comparison ">" (the demo supports ==, !=, =~, !~, in, in~)`},
		{"Resources | where name = 'a'", `column 24: unsupported comparison "=" (the demo supports ==, !=, =~, !~, in, in~)`},
		{"Resources | where properties.count == 3", "column 39: unsupported: number literals (the demo compares strings and true/false)"},
		{"Resources | where tolower(name) == 'x'", "column 19: unsupported function tolower (the demo supports isempty and isnotempty)"},
		{"Resources | where tags == 'x'", "column 19: column \"tags\" is an object; compare one of its properties, e.g. tags.owner"},
		{"Resources | where name.first == 'x'", `column 19: column "name" is a string and has no property "first"`},
		{"Resources | where tags['owner'] == 'x'", "column 23: unsupported character '['"},
		{"Resources | where name == 'open", "column 27: unterminated string literal"},
		{"Resources | where name == 'a\\d'", `column 27: unsupported escape \d in string literal`},
		{"Resources | where name == x", `column 27: expected a string or true/false literal, found "x"`},
		{"Resources | where name in~ 'a'", `column 28: expected ( after in~, found a string literal`},
		{"Resources | where name in~ ('a' 'b')", `column 33: expected , or ) in the in~ list, found a string literal`},
		{"Resources | where isempty(name", "column 31: expected ) after the column of isempty, found end of query"},
		{"Resources | where name == 'a' name", `column 31: expected and, | or end of query after a condition, found "name"`},
		{"Resources | project name | where type == 'x'", `column 34: unknown column "type" (available: name)`},
		{"Resources | project name, name", `column 27: column "name" is projected twice`},
		{"Resources | project name type", `column 26: expected , | or end of query in project, found "type"`},
		{"Resources |", "column 12: expected an operator after |, found end of query"},
		{"Resources where", `column 11: expected | or end of query, found "where"`},
		{"Resources | where name == 'é' | where x == 'y'", `column 39: unknown column "x"`},
		{strings.Repeat(" ", MaxQueryBytes+1), "column 1: query is longer than the 16384-byte limit"},
	}
	for _, tt := range tests {
		t.Run(tt.query, func(t *testing.T) {
			_, err := Parse(tt.query)
			var qe *QueryError
			if !errors.As(err, &qe) {
				t.Fatalf("Parse(%q) = %v, want a *QueryError", tt.query, err)
			}
			if !strings.HasPrefix(err.Error(), tt.want) {
				t.Errorf("error\n got %q\nwant %q", err.Error(), tt.want)
			}
		})
	}
}
