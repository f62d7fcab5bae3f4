package archcheck

import (
	"bufio"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
)

// module is the import path of the repository's Go module.
const module = "github.com/rbookhq/rbook-action"

// maxCell is the longest a cell of ARCHITECTURE.md's package table may be, so the table stays
// one line a cell and scannable.
const maxCell = 300

// genRuntime are the modules the generated code needs: a package that may import `gen/` may
// import them too (ARCHITECTURE.md, "Packages").
var genRuntime = []string{"google.golang.org/protobuf", "connectrpc.com/connect"}

// root is the repository's root, from this package's folder.
const root = "../.."

// row is one line of ARCHITECTURE.md's package table.
type row struct {
	pkg, owns string
	mayImport []string
	line      int
}

// pkgInfo is one Go package of the module: the imports of its non-test files, those of all
// its files, and how many non-test files it has.
type pkgInfo struct {
	imports, testImports map[string]bool
	nonTests             int
}

// readTable parses the "Packages" table of ARCHITECTURE.md: | `pkg` | owns | may import |.
func readTable(t *testing.T) []row {
	t.Helper()
	f, err := os.Open(filepath.Join(root, "ARCHITECTURE.md"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var rows []row
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		if !strings.HasPrefix(line, "| `") {
			continue
		}
		cells := strings.Split(strings.Trim(line, "|"), " | ")
		if len(cells) != 3 {
			t.Errorf("ARCHITECTURE.md:%d: a package row has 3 cells (package | owns | may import), this one %d", n, len(cells))
			continue
		}
		for i, c := range cells {
			if len(c) > maxCell {
				t.Errorf("ARCHITECTURE.md:%d: cell %d is %d characters, over %d: move the detail to the package's section", n, i+1, len(c), maxCell)
			}
		}
		r := row{pkg: strings.Trim(strings.TrimSpace(cells[0]), "`"), owns: cells[1], line: n}
		for _, name := range strings.Split(cells[2], ",") {
			name, _, _ = strings.Cut(strings.TrimSpace(name), " (") // "go-smtp (smtptest)": who imports it
			r.mayImport = append(r.mayImport, strings.Trim(name, "`"))
		}
		rows = append(rows, r)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if len(rows) == 0 {
		t.Fatal("ARCHITECTURE.md: no package table (rows that start with | `package`)")
	}
	return rows
}

// readPackages is every Go package of the module outside gen/ (generated) and folders that are
// modules of their own, with the imports of its non-test files on every platform (build tags
// are not applied).
func readPackages(t *testing.T) map[string]*pkgInfo {
	t.Helper()
	pkgs := map[string]*pkgInfo{}
	fset := token.NewFileSet()
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel := filepath.ToSlash(strings.TrimPrefix(strings.TrimPrefix(path, root), string(filepath.Separator)))
		if d.IsDir() {
			base := d.Name()
			if rel != "" && (strings.HasPrefix(base, ".") || base == "testdata" || base == "node_modules" || rel == "gen") {
				return filepath.SkipDir
			}
			if _, err := os.Stat(filepath.Join(path, "go.mod")); err == nil && rel != "" {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(rel, ".go") {
			return nil
		}
		dir := filepath.ToSlash(filepath.Dir(rel))
		p := pkgs[dir]
		if p == nil {
			p = &pkgInfo{imports: map[string]bool{}, testImports: map[string]bool{}}
			pkgs[dir] = p
		}
		f, err := parser.ParseFile(fset, path, nil, parser.ImportsOnly)
		if err != nil {
			return err
		}
		test := strings.HasSuffix(rel, "_test.go")
		if !test {
			p.nonTests++
		}
		for _, im := range f.Imports {
			ip, _ := strconv.Unquote(im.Path.Value)
			p.testImports[ip] = true
			if !test {
				p.imports[ip] = true
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return pkgs
}

// owner is the row that covers package dir: its own, else the nearest enclosing package's
// (a test fake under its package, such as controlplane/auth/authtest).
func owner(rows map[string]row, dir string) (row, bool) {
	for d := dir; d != "."; d = filepath.ToSlash(filepath.Dir(d)) {
		if r, ok := rows[d]; ok {
			return r, true
		}
	}
	return row{}, false
}

// local resolves a may-import name to the module's package it names: the package whose path
// is name or ends in /name ("runbook" is action/runbook); "gen/" is every generated package.
func local(pkgs map[string]*pkgInfo, name string) []string {
	if name == "gen/" {
		return []string{"gen"}
	}
	var out []string
	for dir := range pkgs {
		if dir == name || strings.HasSuffix(dir, "/"+name) {
			out = append(out, dir)
		}
	}
	return out
}

// within reports whether dir is pkg or a package under it.
func within(dir, pkg string) bool { return dir == pkg || strings.HasPrefix(dir, pkg+"/") }

// external reports whether an outside import path is named by name: the path itself, or a
// path whose elements contain name's ("yaml/v3" names go.yaml.in/yaml/v3, "otel" names
// go.opentelemetry.io/otel/sdk/trace).
func external(path, name string) bool {
	p := "/" + path + "/"
	return strings.HasPrefix(path, name) || strings.Contains(p, "/"+name+"/")
}

func TestEveryPackageImportsOnlyWhatArchitectureMdAllows(t *testing.T) {
	table := readTable(t)
	pkgs := readPackages(t)
	rows := map[string]row{}
	for _, r := range table {
		rows[r.pkg] = r
	}
	allImports := map[string]bool{}
	for _, p := range pkgs {
		for ip := range p.testImports {
			allImports[ip] = true
		}
	}
	dirs := make([]string, 0, len(pkgs))
	for dir := range pkgs {
		dirs = append(dirs, dir)
	}
	sort.Strings(dirs)
	for _, dir := range dirs {
		r, ok := owner(rows, dir)
		if !ok {
			t.Errorf("%s: no row in ARCHITECTURE.md's package table covers it: add one (package | owns | may import)", dir)
			continue
		}
		if r.pkg == "cmd/rbook" || pkgs[dir].nonTests == 0 {
			continue // cmd/rbook may import everything; a test-only package's row says what its tests use
		}
		for ip := range pkgs[dir].imports {
			if msg := allowed(pkgs, r, dir, ip); msg != "" {
				t.Errorf("%s imports %s, which ARCHITECTURE.md:%d (%s) does not list: %s", dir, ip, r.line, r.pkg, msg)
			}
		}
	}
	for _, r := range table {
		if _, ok := pkgs[r.pkg]; !ok && !strings.Contains(r.pkg, " ") {
			t.Errorf("ARCHITECTURE.md:%d: %s is not a package of the module: fix or remove the row", r.line, r.pkg)
		}
		if r.pkg == "cmd/rbook" || pkgs[r.pkg] == nil || pkgs[r.pkg].nonTests == 0 {
			continue
		}
		for _, name := range r.mayImport {
			if name == "std" || len(local(pkgs, name)) > 0 || slices.ContainsFunc(sortedKeys(allImports), func(ip string) bool { return external(ip, name) }) {
				continue
			}
			t.Errorf("ARCHITECTURE.md:%d: %s may import %q, which names no package of the module and nothing any package imports: fix the name", r.line, r.pkg, name)
		}
	}
}

// allowed is "" when row r allows package dir to import ip, else what to do.
func allowed(pkgs map[string]*pkgInfo, r row, dir, ip string) string {
	rel, ours := strings.CutPrefix(ip, module+"/")
	if !ours {
		if !strings.Contains(strings.SplitN(ip, "/", 2)[0], ".") {
			return "" // the standard library: every package may import it
		}
		for _, name := range r.mayImport {
			if external(ip, name) || name == "gen/" && slices.ContainsFunc(genRuntime, func(m string) bool { return within(ip, m) }) {
				return ""
			}
		}
		return "add the module to its may-import cell"
	}
	if within(rel, r.pkg) || within(rel, "internal/lazyregexp") {
		return "" // its own subpackages; every package may import internal/lazyregexp
	}
	for _, name := range r.mayImport {
		for _, p := range local(pkgs, name) {
			if within(rel, p) {
				return ""
			}
		}
	}
	return "add it to the may-import cell, or import it through a listed package"
}

// sortedKeys is m's keys in order.
func sortedKeys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// cmdLimit and funcLimit keep cmd/rbook to wiring (flags, environment, rendering, platform
// files): the application logic lives in the packages ARCHITECTURE.md lists.
const (
	cmdLimit  = 4000
	funcLimit = 80
)

func TestCmdRbookStaysWiring(t *testing.T) {
	files, err := filepath.Glob(filepath.Join(root, "cmd", "rbook", "*.go"))
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	lines := 0
	for _, file := range files {
		if strings.HasSuffix(file, "_test.go") {
			continue
		}
		src, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		lines += strings.Count(string(src), "\n")
		f, err := parser.ParseFile(fset, file, src, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range f.Decls {
			fd, ok := d.(*ast.FuncDecl)
			if !ok {
				continue
			}
			if n := fset.Position(fd.End()).Line - fset.Position(fd.Pos()).Line + 1; n > funcLimit {
				t.Errorf("%s: %s is %d lines, over %d: move its logic to a package", fset.Position(fd.Pos()), fd.Name.Name, n, funcLimit)
			}
		}
	}
	if lines >= cmdLimit {
		t.Errorf("cmd/rbook has %d non-test lines, at or over %d: move application logic to a package (ARCHITECTURE.md)", lines, cmdLimit)
	}
}
