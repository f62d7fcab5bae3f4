package store

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
)

// The cached bindings and iteration counts give, transition after transition, byte for byte
// the text that decoding and encoding the whole object gives (withBinding, countStart1):
// from canonical and non-canonical starting texts, for new and overwritten keys, keys and
// values json.Marshal escapes, and a value over the bindings cap. Runs interleave, and a
// text the cache did not write (a rolled-back transaction, another replica) is read afresh.
func TestCachedBindingsAndCountsEncodeAsTheWholeObject(t *testing.T) {
	starts := []string{`{}`, `null`, `{"b":1,"a":{"x" : [1, 2]}}`, `{"a<b>":"&","é":"\u00e9","a":1,"a":2}`, ` { "z" : true } `}
	keys := []string{"n1", "n2", "a", "é", "a<b>", "&", "z", `q"uote`}
	values := []string{`{"stdout":"","exit_code":0}`, `{"v": "<tag> & more", "n": 1.50}`, `{"output":"x\u2028y"}`, `{ }`, `{"k":[1,{"a":null}]}`}
	rng := rand.New(rand.NewPCG(1, 2))
	for _, start := range starts {
		var c objectCache
		runs := map[string]*[2]string{"r1": {start, `{}`}, "r2": {start, `{"n1":2}`}}
		for i := range 300 {
			run := []string{"r1", "r2"}[rng.IntN(2)]
			cur := runs[run]
			key, val := keys[rng.IntN(len(keys))], values[rng.IntN(len(values))]
			if i%97 == 0 { // a text the cache did not write
				cur[0] = strings.Replace(cur[0], "{", "{ ", 1)
			}
			want, wantErr := withBinding(cur[0], key, json.RawMessage(val))
			got, err := c.withBindingCached(run, cur[0], key, json.RawMessage(val))
			if got != want || fmt.Sprint(err) != fmt.Sprint(wantErr) {
				t.Fatalf("start %s, step %d: bindings\n got %s (%v)\nwant %s (%v)", start, i, got, err, want, wantErr)
			}
			cur[0] = got
			wantCounts, _ := countStart1(run, cur[1], key)
			gotCounts, ok := c.countStartCached(run, cur[1], key)
			if !ok || gotCounts != wantCounts {
				t.Fatalf("start %s, step %d: counts\n got %s (%v)\nwant %s", start, i, gotCounts, ok, wantCounts)
			}
			cur[1] = gotCounts
		}
	}
	var c objectCache
	big := json.RawMessage(`{"out":"` + strings.Repeat("x", MaxBindingsBytes) + `"}`)
	want, _ := withBinding(`{"a":1}`, "big", big)
	if got, err := c.withBindingCached("r", `{"a":1}`, "big", big); err != nil || got != want || !strings.Contains(got, "omitted") {
		t.Fatalf("over the cap: got %.200s (%v), want %.200s", got, err, want)
	}
	large := json.RawMessage(`{"out":"` + strings.Repeat("y", objectCacheBytes) + `"}`)
	want, _ = withBinding(`{"a":1}`, "large", large)
	if got, err := c.withBindingCached("large", `{"a":1}`, "large", large); err != nil || got != want || c.bindings["large"] != nil {
		t.Fatalf("over the cache's size: got %.200s (%v, cached %v), want %.200s", got, err, c.bindings["large"] != nil, want)
	}
	if _, err := c.withBindingCached("r", `[1]`, "k", json.RawMessage(`{}`)); err == nil {
		t.Fatal("bindings that are not an object were accepted")
	}
	if _, ok := c.countStartCached("r", `{"n":"two"}`, "n"); ok {
		t.Fatal("counts that are not numbers were counted")
	}
}
