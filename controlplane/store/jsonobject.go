package store

import (
	"encoding/json"
	"slices"
	"strconv"
	"strings"
)

// objectText is a JSON object (a playbook run's bindings or iteration counts) kept parsed
// beside the text the store last wrote for it, so that setting one key does not decode and
// encode the whole object again: the bindings grow with every finished node, and decoding
// them on each transition made a long run's transitions cost more and more
// (BenchmarkRecordPlaybookNodeChain). The text it encodes is byte for byte what
// json.Marshal writes for the same map (keys sorted, values compact and HTML-escaped), so a
// run's stored bindings are the same whether or not the object was cached.
type objectText struct {
	text string   // the object's text, as json.Marshal writes the map
	keys []string // sorted
	// vals holds each key's encoded key and value, as json.Marshal writes them.
	vals map[string]objectMember
}

type objectMember struct{ key, val []byte }

// encode writes the object as json.Marshal writes the map.
func (o *objectText) encode() string {
	if len(o.keys) == 0 {
		return "{}"
	}
	n := 1
	for _, k := range o.keys {
		m := o.vals[k]
		n += len(m.key) + len(m.val) + 2
	}
	var b strings.Builder
	b.Grow(n)
	b.WriteByte('{')
	for i, k := range o.keys {
		if i > 0 {
			b.WriteByte(',')
		}
		m := o.vals[k]
		b.Write(m.key)
		b.WriteByte(':')
		b.Write(m.val)
	}
	b.WriteByte('}')
	return b.String()
}

// set sets key to val (already as json.Marshal writes it) and returns a function that undoes it.
func (o *objectText) set(key string, val []byte) (undo func()) {
	old, had := o.vals[key]
	if had {
		o.vals[key] = objectMember{old.key, val}
		return func() { o.vals[key] = old }
	}
	kj, _ := json.Marshal(key) // cannot fail: a string
	o.vals[key] = objectMember{kj, val}
	i, _ := slices.BinarySearch(o.keys, key)
	o.keys = slices.Insert(o.keys, i, key)
	return func() {
		delete(o.vals, key)
		o.keys = slices.Delete(o.keys, i, i+1)
	}
}

// newObject builds the objectText of a map decoded from a text; enc writes one value as
// json.Marshal writes it.
func newObject[V any](m map[string]V, enc func(V) ([]byte, error)) (*objectText, error) {
	o := &objectText{keys: make([]string, 0, len(m)), vals: make(map[string]objectMember, len(m))}
	for k, v := range m {
		val, err := enc(v)
		if err != nil {
			return nil, err
		}
		kj, _ := json.Marshal(k) // cannot fail: a string
		o.keys = append(o.keys, k)
		o.vals[k] = objectMember{kj, val}
	}
	slices.Sort(o.keys)
	o.text = o.encode()
	return o, nil
}

// objectCacheRuns bounds the runs whose bindings and counts the writer keeps parsed (the runs
// recording at the same time; one that falls out is parsed again from its text), and
// objectCacheBytes the text of an object it keeps: with the parsed copy, the cache holds at
// most about 16 × 2 × 256 KiB = 8 MiB per kind. A larger object is decoded each time, as
// before (its run's every transition then costs more, but it is rare: a 256 KiB object is
// some 5,000 nodes' bindings of the usual size).
const (
	objectCacheRuns  = 16
	objectCacheBytes = 256 << 10
)

// objectCache holds the parsed bindings and iteration counts of the runs the writer recorded
// last. An entry is used only while its text is the text read from the database, so a rolled
// back transaction or a write by another replica simply makes the next read parse again.
// Writer goroutine only.
type objectCache struct {
	bindings, counts map[string]*objectText
}

// cached is m's entry for run when its text is text, else nil.
func cached(m map[string]*objectText, run, text string) *objectText {
	if o := m[run]; o != nil && o.text == text {
		return o
	}
	return nil
}

// put makes o run's entry of m, dropping another run's when m is full.
func put(m *map[string]*objectText, run string, o *objectText) {
	if len(o.text) > objectCacheBytes {
		delete(*m, run)
		return
	}
	if *m == nil {
		*m = map[string]*objectText{}
	}
	if _, ok := (*m)[run]; !ok && len(*m) >= objectCacheRuns {
		for k := range *m { // drop any one
			delete(*m, k)
			break
		}
	}
	(*m)[run] = o
}

// withBindingCached is withBinding through the cache: the same text and errors.
func (c *objectCache) withBindingCached(run, bindings, key string, value json.RawMessage) (string, error) {
	o := cached(c.bindings, run, bindings)
	if o == nil {
		var m map[string]json.RawMessage
		if err := json.Unmarshal([]byte(bindings), &m); err != nil {
			return withBinding(bindings, key, value) // its error
		}
		var err error
		if o, err = newObject(m, func(v json.RawMessage) ([]byte, error) { return json.Marshal(v) }); err != nil {
			return withBinding(bindings, key, value)
		}
	}
	val, err := json.Marshal(value)
	if err != nil {
		delete(c.bindings, run)
		return withBinding(bindings, key, value)
	}
	undo := o.set(key, val)
	text := o.encode()
	if len(text) > MaxBindingsBytes { // rare: withBinding writes the note
		undo()
		delete(c.bindings, run)
		return withBinding(bindings, key, value)
	}
	o.text = text
	put(&c.bindings, run, o)
	return text, nil
}

// countStartCached adds one to counts[node] in the iteration counts text, as
// json.Unmarshal into map[string]int, ++ and json.Marshal do; ok is false when the text is
// not such a map (the caller then decodes it and reports the error).
func (c *objectCache) countStartCached(run, counts, node string) (string, bool) {
	o := cached(c.counts, run, counts)
	if o == nil {
		var m map[string]int
		if err := json.Unmarshal([]byte(counts), &m); err != nil {
			return "", false
		}
		o, _ = newObject(m, func(n int) ([]byte, error) { return strconv.AppendInt(nil, int64(n), 10), nil })
	}
	n := 0
	if m, ok := o.vals[node]; ok {
		v, err := strconv.Atoi(string(m.val))
		if err != nil {
			delete(c.counts, run)
			return "", false
		}
		n = v
	}
	o.set(node, strconv.AppendInt(nil, int64(n+1), 10))
	o.text = o.encode()
	put(&c.counts, run, o)
	return o.text, true
}
