package charttest

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// schemaProperties reads the property names of the object at path (keys into "properties")
// in the JSON schema file.
func schemaProperties(t *testing.T, file string, path ...string) []string {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var node map[string]any
	if err := json.Unmarshal(b, &node); err != nil {
		t.Fatalf("%s: %v", file, err)
	}
	for _, p := range path {
		props, _ := node["properties"].(map[string]any)
		next, ok := props[p].(map[string]any)
		if !ok {
			t.Fatalf("%s has no property %q", file, p)
		}
		node = next
	}
	props, _ := node["properties"].(map[string]any)
	var names []string
	for k := range props {
		names = append(names, k)
	}
	slices.Sort(names)
	return names
}

// Every key the chart's values accept under serve: is a setting of rbook serve's config file
// (docs/serve-config.schema.json, generated from serve's flags): a renamed or removed flag
// fails here instead of in a cluster, where rbook serve would refuse the file at start.
func TestChartServeKeysAreServeSettings(t *testing.T) {
	chart := schemaProperties(t, filepath.Join(chartDir, "values.schema.json"), "serve")
	serve := schemaProperties(t, filepath.Join("..", "..", "docs", "serve-config.schema.json"))
	if len(chart) < 10 || len(serve) < 20 {
		t.Fatalf("chart serve keys %v, serve settings %v: is the scan reading the schemas?", chart, serve)
	}
	for _, k := range chart {
		if !slices.Contains(serve, k) {
			t.Errorf("charts/rbook/values.schema.json: serve.%s is not a key of rbook serve's config file (docs/serve-config.schema.json)", k)
		}
	}
}
