package state

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
)

// The playbook objects of the state file that grow with the run (docs/development.md, "Benchmarks"): bindings
// holds every node's output and iteration_counts every node's count, so re-encoding them by
// reflection at each write made a write O(nodes) (3.9 ms at 1,000 nodes, measured). A
// mapCache keeps each entry's encoding and re-encodes only the entries whose value changed.
// The bytes are exactly what json.MarshalIndent gives for the whole map.

// cachedPlaceholderKey stands in for a cached map while the header is encoded: the header's
// map is replaced by {cachedPlaceholderKey: null}, whose encoding (at the top level of the
// file, on lines of its own) is then swapped for the cached bytes. A NUL can only appear in
// encoded JSON as the escape \u0000, and the placeholder's lines carry the top-level
// indentation no string value can, so the swap cannot hit anything else.
const cachedPlaceholderKey = "\x00rbook-cached"

// placeholderJSON is the placeholder object as the header encoder writes it (2-space indent,
// a top-level field): the part after `"<field>": `.
const placeholderJSON = "{\n    \"\\u0000rbook-cached\": null\n  }"

// placeholderCountJSON is the placeholder of iteration_counts (a map of ints).
const placeholderCountJSON = "{\n    \"\\u0000rbook-cached\": 0\n  }"

// mapCache is the cached encoding of one map of the state file.
type mapCache struct {
	keys []string // sorted, as encoding/json orders map keys
	ent  map[string]mapEntry
	out  []byte
}

// mapEntry is one key's line (`\n    "key": value`) and the identity of the value it encodes.
type mapEntry struct {
	id   any
	line []byte
}

// ptrID identifies a map or slice value by its type, data pointer and length: binding values
// are replaced by applyPlaybook (a freshly parsed object), never changed in place.
type ptrID struct {
	t reflect.Type
	p uintptr
	n int
}

// valueID is v's identity for the cache: v itself when it is comparable, a ptrID for a map or
// slice, ok false when v cannot be identified (always re-encoded).
func valueID(v any) (id any, ok bool) {
	rv := reflect.ValueOf(v)
	switch {
	case !rv.IsValid():
		return nil, true
	case rv.Kind() == reflect.Map || rv.Kind() == reflect.Slice:
		return ptrID{rv.Type(), rv.Pointer(), rv.Len()}, true
	case rv.Comparable() && rv.Kind() != reflect.Float32 && rv.Kind() != reflect.Float64:
		return v, true
	case rv.Kind() == reflect.Float64 && rv.Float() == rv.Float(): // not NaN
		return v, true
	}
	return nil, false
}

// encodeCachedMap returns m's indented encoding as json.MarshalIndent(m, "  ", "  ") writes
// it, reusing the lines of entries whose identity (id) did not change since the last call.
// The result aliases c's buffer until the next call.
func encodeCachedMap[V any](c *mapCache, m map[string]V, id func(V) (any, bool)) ([]byte, error) {
	same := len(c.keys) == len(m)
	for i := 0; same && i < len(c.keys); i++ {
		_, same = m[c.keys[i]]
	}
	if !same {
		c.keys = c.keys[:0]
		for k := range m {
			c.keys = append(c.keys, k)
		}
		slices.Sort(c.keys)
		for k := range c.ent {
			if _, ok := m[k]; !ok {
				delete(c.ent, k)
			}
		}
	}
	if c.ent == nil {
		c.ent = make(map[string]mapEntry, len(m))
	}
	c.out = append(c.out[:0], '{')
	for i, k := range c.keys {
		v := m[k]
		vid, ok := id(v)
		e, hit := c.ent[k]
		if !hit || !ok || e.id != vid {
			kb, err := json.Marshal(k)
			if err != nil {
				return nil, err
			}
			vb, err := json.MarshalIndent(v, "    ", "  ")
			if err != nil {
				return nil, err
			}
			line := make([]byte, 0, len(kb)+len(vb)+7)
			line = append(append(append(append(line, "\n    "...), kb...), ": "...), vb...)
			e = mapEntry{id: vid, line: line}
			if ok {
				c.ent[k] = e
			} else {
				delete(c.ent, k) // not identifiable: never reused
			}
		}
		if i > 0 {
			c.out = append(c.out, ',')
		}
		c.out = append(c.out, e.line...)
	}
	return append(c.out, "\n  }"...), nil
}

// spliceCached replaces the placeholder (its encoding ph) of the top-level field name in head
// with enc. Not finding it is an error (a bug: nothing half-encoded is ever written).
func spliceCached(head []byte, name string, enc []byte, placeholder string) ([]byte, error) {
	ph := []byte("\n  \"" + name + "\": " + placeholder)
	i := bytes.Index(head, ph)
	if i < 0 {
		return nil, fmt.Errorf("state: encoding %s: placeholder not found", name)
	}
	at := i + len(ph) - len(placeholder)
	out := make([]byte, 0, len(head)-len(placeholder)+len(enc))
	out = append(append(append(out, head[:at]...), enc...), head[i+len(ph):]...)
	return out, nil
}
