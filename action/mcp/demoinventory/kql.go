package demoinventory

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"unicode/utf8"
)

// MaxQueryBytes caps a query's length (16 KiB); longer queries are rejected unparsed.
const MaxQueryBytes = 16 << 10

// Row is one resource or one projected result row, as JSON-shaped Go values
// (string, bool, map[string]any).
type Row = map[string]any

// QueryError is a query the demo evaluator cannot run: bad or unsupported syntax, or an
// unknown column. Column is the 1-based rune position of the problem in the query.
type QueryError struct {
	Column int
	Msg    string
}

// Error formats the error as "column N: message".
func (e *QueryError) Error() string { return fmt.Sprintf("column %d: %s", e.Column, e.Msg) }

// Query is a parsed query of the supported KQL subset; see Parse.
type Query struct {
	stages []func([]Row) []Row
}

// Parse compiles query, which must use only this KQL subset (the demo understands no more):
//
//	Resources                      the one table (also spelled resources)
//	| where <cond> and <cond> ...  cond: path == | != | =~ | !~ literal,
//	                               path in (...) | in~ (...) of literals,
//	                               isempty(path), isnotempty(path)
//	| project path, path ...       a dotted path a.b becomes column a_b, as in KQL
//
// Paths are columns (id, name, type, resourceGroup, location, subscriptionId, tags,
// properties) or dotted properties of tags and properties, e.g. tags.owner,
// properties.httpsOnly. Literals are 'single' or "double" quoted strings (backslash escapes)
// and true/false. Values compare by their text (true is "true"); a missing property reads as
// "", so it is empty and differs from every non-empty literal. Anything else
// (or, not, numbers, other operators and functions) is a *QueryError, never an empty result.
func Parse(query string) (*Query, error) {
	if len(query) > MaxQueryBytes {
		return nil, &QueryError{Column: 1, Msg: fmt.Sprintf("query is longer than the %d-byte limit", MaxQueryBytes)}
	}
	toks, err := lex(query)
	if err != nil {
		return nil, err
	}
	p := &parser{toks: toks, schema: resourceSchema()}
	return p.query()
}

// Run evaluates q over rows, which it does not modify, and returns the resulting rows.
func (q *Query) Run(rows []Row) []Row {
	for _, stage := range q.stages {
		rows = stage(rows)
	}
	return rows
}

// columnKind says what a column holds, so paths can be checked before anything runs.
type columnKind int

const (
	kindScalar  columnKind = iota // a string: no properties
	kindObject                    // tags, properties: compare a property, not the object
	kindDynamic                   // a property of an object: anything, possibly missing
)

func resourceSchema() map[string]columnKind {
	return map[string]columnKind{
		"id": kindScalar, "name": kindScalar, "type": kindScalar, "resourceGroup": kindScalar,
		"location": kindScalar, "subscriptionId": kindScalar,
		"tags": kindObject, "properties": kindObject,
	}
}

// ---- lexer ----

type tokenKind int

const (
	tokEOF tokenKind = iota
	tokIdent
	tokString
	tokNumber
	tokOp // ==, !=, =~, !~, =, and any other run of operator characters
	tokPipe
	tokComma
	tokDot
	tokLParen
	tokRParen
)

type token struct {
	kind tokenKind
	text string // identifier, decoded string value or operator
	col  int
}

func lex(src string) ([]token, error) {
	var toks []token
	col := func(i int) int { return utf8.RuneCountInString(src[:i]) + 1 }
	for i := 0; i < len(src); {
		c := src[i]
		switch {
		case c == ' ' || c == '\t' || c == '\n' || c == '\r':
			i++
		case isIdentStart(c):
			j := i + 1
			for j < len(src) && (isIdentPart(src[j]) || src[j] == '-' && j+1 < len(src) && isIdentStart(src[j+1])) {
				j++
			}
			// "in~" is one operator word in KQL.
			if src[i:j] == "in" && j < len(src) && src[j] == '~' {
				j++
			}
			toks = append(toks, token{tokIdent, src[i:j], col(i)})
			i = j
		case c >= '0' && c <= '9':
			j := i
			for j < len(src) && (isIdentPart(src[j]) || src[j] == '.') {
				j++
			}
			toks = append(toks, token{tokNumber, src[i:j], col(i)})
			i = j
		case c == '\'' || c == '"':
			s, next, err := lexString(src, i, false)
			if err != nil {
				return nil, &QueryError{Column: col(i), Msg: err.Error()}
			}
			toks = append(toks, token{tokString, s, col(i)})
			i = next
		case c == '@' && i+1 < len(src) && (src[i+1] == '\'' || src[i+1] == '"'):
			s, next, err := lexString(src, i+1, true)
			if err != nil {
				return nil, &QueryError{Column: col(i), Msg: err.Error()}
			}
			toks = append(toks, token{tokString, s, col(i)})
			i = next
		case strings.IndexByte("=!~<>", c) >= 0:
			j := i + 1
			for j < len(src) && strings.IndexByte("=!~<>", src[j]) >= 0 {
				j++
			}
			toks = append(toks, token{tokOp, src[i:j], col(i)})
			i = j
		case c == '|':
			toks = append(toks, token{tokPipe, "|", col(i)})
			i++
		case c == ',':
			toks = append(toks, token{tokComma, ",", col(i)})
			i++
		case c == '.':
			toks = append(toks, token{tokDot, ".", col(i)})
			i++
		case c == '(':
			toks = append(toks, token{tokLParen, "(", col(i)})
			i++
		case c == ')':
			toks = append(toks, token{tokRParen, ")", col(i)})
			i++
		default:
			r, _ := utf8.DecodeRuneInString(src[i:])
			return nil, &QueryError{Column: col(i), Msg: fmt.Sprintf("unsupported character %q", r)}
		}
	}
	return append(toks, token{tokEOF, "", col(len(src))}), nil
}

// lexString decodes the string literal whose opening quote is at src[i]. Verbatim strings
// (@'...') take backslashes literally.
func lexString(src string, i int, verbatim bool) (string, int, error) {
	quote := src[i]
	var b strings.Builder
	for j := i + 1; j < len(src); j++ {
		c := src[j]
		switch {
		case c == quote:
			return b.String(), j + 1, nil
		case c == '\n':
			return "", 0, fmt.Errorf("string literal runs past the end of the line")
		case c == '\\' && !verbatim:
			if j+1 >= len(src) {
				return "", 0, fmt.Errorf("unterminated string literal")
			}
			j++
			switch src[j] {
			case '\\', '\'', '"':
				b.WriteByte(src[j])
			case 'n':
				b.WriteByte('\n')
			case 't':
				b.WriteByte('\t')
			default:
				return "", 0, fmt.Errorf("unsupported escape \\%c in string literal", src[j])
			}
		default:
			b.WriteByte(c)
		}
	}
	return "", 0, fmt.Errorf("unterminated string literal")
}

func isIdentStart(c byte) bool { return c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' }
func isIdentPart(c byte) bool  { return isIdentStart(c) || c >= '0' && c <= '9' }

// ---- parser ----

type parser struct {
	toks   []token
	pos    int
	schema map[string]columnKind
	stages []func([]Row) []Row
}

func (p *parser) peek() token { return p.toks[p.pos] }
func (p *parser) next() token {
	t := p.toks[p.pos]
	if t.kind != tokEOF {
		p.pos++
	}
	return t
}

func errAt(t token, format string, args ...any) error {
	return &QueryError{Column: t.col, Msg: fmt.Sprintf(format, args...)}
}

func describe(t token) string {
	switch t.kind {
	case tokEOF:
		return "end of query"
	case tokString:
		return "a string literal"
	default:
		return fmt.Sprintf("%q", t.text)
	}
}

func (p *parser) query() (*Query, error) {
	table := p.next()
	if table.kind != tokIdent || !strings.EqualFold(table.text, "Resources") {
		return nil, errAt(table, "expected the table Resources at the start, found %s (the demo inventory has only that table)", describe(table))
	}
	for {
		t := p.next()
		switch t.kind {
		case tokEOF:
			return &Query{stages: p.stages}, nil
		case tokPipe:
		default:
			return nil, errAt(t, "expected | or end of query, found %s", describe(t))
		}
		op := p.next()
		var err error
		switch {
		case op.kind == tokIdent && op.text == "where":
			err = p.where()
		case op.kind == tokIdent && op.text == "project":
			err = p.project()
		case op.kind == tokIdent:
			err = errAt(op, "unsupported operator %q (the demo supports where and project)", op.text)
		default:
			err = errAt(op, "expected an operator after |, found %s", describe(op))
		}
		if err != nil {
			return nil, err
		}
	}
}

type predicate func(Row) bool

func (p *parser) where() error {
	var conds []predicate
	for {
		cond, err := p.condition()
		if err != nil {
			return err
		}
		conds = append(conds, cond)
		t := p.peek()
		switch {
		case t.kind == tokIdent && t.text == "and":
			p.next()
			continue
		case t.kind == tokIdent && t.text == "or":
			return errAt(t, "unsupported: or (the demo supports and only; use in~ (...) for alternatives)")
		case t.kind == tokPipe || t.kind == tokEOF:
		default:
			return errAt(t, "expected and, | or end of query after a condition, found %s", describe(t))
		}
		break
	}
	p.stages = append(p.stages, func(rows []Row) []Row {
		var kept []Row
		for _, row := range rows {
			if !slices.ContainsFunc(conds, func(c predicate) bool { return !c(row) }) {
				kept = append(kept, row)
			}
		}
		return kept
	})
	return nil
}

func (p *parser) condition() (predicate, error) {
	t := p.peek()
	if t.kind == tokIdent && (t.text == "isempty" || t.text == "isnotempty") {
		p.next()
		if open := p.next(); open.kind != tokLParen {
			return nil, errAt(open, "expected ( after %s, found %s", t.text, describe(open))
		}
		path, err := p.path(true)
		if err != nil {
			return nil, err
		}
		if closing := p.next(); closing.kind != tokRParen {
			return nil, errAt(closing, "expected ) after the column of %s, found %s", t.text, describe(closing))
		}
		wantEmpty := t.text == "isempty"
		return func(r Row) bool { return (textOf(resolve(r, path)) == "") == wantEmpty }, nil
	}
	if t.kind == tokIdent && t.text == "not" {
		return nil, errAt(t, "unsupported: not (use != or !~)")
	}
	if t.kind == tokLParen {
		return nil, errAt(t, "unsupported: parentheses around conditions")
	}
	path, err := p.path(true)
	if err != nil {
		return nil, err
	}
	op := p.next()
	switch {
	case op.kind == tokOp && (op.text == "==" || op.text == "!=" || op.text == "=~" || op.text == "!~"):
		lit, err := p.literal()
		if err != nil {
			return nil, err
		}
		return compare(path, op.text, lit), nil
	case op.kind == tokIdent && (op.text == "in" || op.text == "in~"):
		list, err := p.literalList(op.text)
		if err != nil {
			return nil, err
		}
		fold := op.text == "in~"
		return func(r Row) bool {
			v := textOf(resolve(r, path))
			return slices.ContainsFunc(list, func(l string) bool { return equal(v, l, fold) })
		}, nil
	case op.kind == tokOp || op.kind == tokIdent:
		return nil, errAt(op, "unsupported comparison %q (the demo supports ==, !=, =~, !~, in, in~)", op.text)
	default:
		return nil, errAt(op, "expected a comparison after the column, found %s", describe(op))
	}
}

func compare(path []string, op, lit string) predicate {
	fold := op == "=~" || op == "!~"
	negate := op == "!=" || op == "!~"
	return func(r Row) bool { return equal(textOf(resolve(r, path)), lit, fold) != negate }
}

func equal(a, b string, fold bool) bool {
	if fold {
		return strings.EqualFold(a, b)
	}
	return a == b
}

func (p *parser) literal() (string, error) {
	t := p.next()
	switch {
	case t.kind == tokString:
		return t.text, nil
	case t.kind == tokIdent && (t.text == "true" || t.text == "false"):
		return t.text, nil
	case t.kind == tokNumber:
		return "", errAt(t, "unsupported: number literals (the demo compares strings and true/false)")
	default:
		return "", errAt(t, "expected a string or true/false literal, found %s", describe(t))
	}
}

func (p *parser) literalList(op string) ([]string, error) {
	if open := p.next(); open.kind != tokLParen {
		return nil, errAt(open, "expected ( after %s, found %s", op, describe(open))
	}
	var list []string
	for {
		lit, err := p.literal()
		if err != nil {
			return nil, err
		}
		list = append(list, lit)
		switch t := p.next(); t.kind {
		case tokComma:
			continue
		case tokRParen:
			return list, nil
		default:
			return nil, errAt(t, "expected , or ) in the %s list, found %s", op, describe(t))
		}
	}
}

// path parses a column or dotted property path and checks it against the current columns.
// compared says the path's value is compared, which an object column cannot be.
func (p *parser) path(compared bool) ([]string, error) {
	first := p.next()
	if first.kind != tokIdent {
		return nil, errAt(first, "expected a column name, found %s", describe(first))
	}
	if p.peek().kind == tokLParen {
		return nil, errAt(first, "unsupported function %s (the demo supports isempty and isnotempty)", first.text)
	}
	kind, ok := p.schema[first.text]
	if !ok {
		return nil, errAt(first, "unknown column %q (available: %s)", first.text, strings.Join(p.columns(), ", "))
	}
	path := []string{first.text}
	for p.peek().kind == tokDot {
		p.next()
		prop := p.next()
		if prop.kind != tokIdent {
			return nil, errAt(prop, "expected a property name after ., found %s", describe(prop))
		}
		path = append(path, prop.text)
	}
	switch {
	case kind == kindScalar && len(path) > 1:
		return nil, errAt(first, "column %q is a string and has no property %q", first.text, path[1])
	case kind == kindObject && len(path) == 1 && compared:
		return nil, errAt(first, "column %q is an object; compare one of its properties, e.g. %s.%s", first.text, first.text, exampleProperty(first.text))
	}
	return path, nil
}

func exampleProperty(column string) string {
	if column == "tags" {
		return "owner"
	}
	return "httpsOnly"
}

func (p *parser) columns() []string {
	cols := make([]string, 0, len(p.schema))
	for c := range p.schema {
		cols = append(cols, c)
	}
	slices.Sort(cols)
	return cols
}

func (p *parser) project() error {
	type column struct {
		name string
		path []string
	}
	var cols []column
	next := map[string]columnKind{}
	for {
		start := p.peek()
		path, err := p.path(false)
		if err != nil {
			return err
		}
		if t := p.peek(); t.kind == tokOp && t.text == "=" {
			return errAt(t, "unsupported: renaming columns in project")
		}
		name := strings.Join(path, "_")
		if _, dup := next[name]; dup {
			return errAt(start, "column %q is projected twice", name)
		}
		kind := kindDynamic
		if len(path) == 1 {
			kind = p.schema[name]
		}
		next[name] = kind
		cols = append(cols, column{name, path})
		t := p.peek()
		if t.kind == tokComma {
			p.next()
			continue
		}
		if t.kind != tokPipe && t.kind != tokEOF {
			return errAt(t, "expected , | or end of query in project, found %s", describe(t))
		}
		break
	}
	p.schema = next
	p.stages = append(p.stages, func(rows []Row) []Row {
		out := make([]Row, 0, len(rows))
		for _, row := range rows {
			projected := Row{}
			for _, c := range cols {
				projected[c.name] = resolve(row, c.path)
			}
			out = append(out, projected)
		}
		return out
	})
	return nil
}

// resolve follows path through nested objects; a missing step yields nil.
func resolve(row Row, path []string) any {
	var v any = row
	for _, part := range path {
		m, ok := v.(map[string]any)
		if !ok {
			return nil
		}
		v = m[part]
	}
	return v
}

// textOf is the text a value compares by: strings as they are, nil as "", booleans as
// true/false, anything else as compact JSON.
func textOf(v any) string {
	switch v := v.(type) {
	case nil:
		return ""
	case string:
		return v
	case bool:
		if v {
			return "true"
		}
		return "false"
	default:
		b, err := json.Marshal(v)
		if err != nil {
			return fmt.Sprint(v)
		}
		return string(b)
	}
}
