// Package house measures the shape of the module with go/ast: lines per
// package and per file, functions and their lengths, and which imlab
// packages each package imports. ARCHITECTURE.md's "The house" is written
// from what it prints (go test ./internal/house -run TestHouse -v).
//
// It must not be imported by the lab or the server: it only reads source
// files.
package house

import (
	"bytes"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
)

// Func is one function or method.
type Func struct {
	Pkg, File, Name string
	Lines           int
}

// Pkg is one package directory's non-test Go files.
type Pkg struct {
	Path    string         // import path below the module, e.g. "runner"
	Lines   int            // lines of its non-test files
	Files   map[string]int // file name -> lines
	Imports map[string]bool
}

// Tree is what Measure found.
type Tree struct {
	Pkgs  map[string]*Pkg
	Funcs []Func
}

// Measure reads every non-test .go file below root (the module's
// directory, whose module path is module), skipping testdata and dot
// directories.
func Measure(root, module string) (*Tree, error) {
	t := &Tree{Pkgs: map[string]*Pkg{}}
	fset := token.NewFileSet()
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if n := d.Name(); path != root && (strings.HasPrefix(n, ".") || n == "testdata") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		return t.addFile(fset, root, module, path)
	})
	if err != nil {
		return nil, fmt.Errorf("house: %w", err)
	}
	return t, nil
}

func (t *Tree) addFile(fset *token.FileSet, root, module, path string) error {
	src, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	f, err := parser.ParseFile(fset, path, src, parser.SkipObjectResolution)
	if err != nil {
		return err
	}
	rel, err := filepath.Rel(root, filepath.Dir(path))
	if err != nil {
		return err
	}
	rel = filepath.ToSlash(rel)
	p := t.Pkgs[rel]
	if p == nil {
		p = &Pkg{Path: rel, Files: map[string]int{}, Imports: map[string]bool{}}
		t.Pkgs[rel] = p
	}
	n := bytes.Count(src, []byte("\n"))
	p.Lines += n
	p.Files[filepath.Base(path)] = n
	for _, im := range f.Imports {
		if ip := strings.Trim(im.Path.Value, `"`); strings.HasPrefix(ip, module+"/") {
			p.Imports[strings.TrimPrefix(ip, module+"/")] = true
		}
	}
	for _, d := range f.Decls {
		fd, ok := d.(*ast.FuncDecl)
		if !ok || fd.Body == nil {
			continue
		}
		name := fd.Name.Name
		if fd.Recv != nil && len(fd.Recv.List) > 0 {
			name = recvName(fd.Recv.List[0].Type) + "." + name
		}
		lines := fset.Position(fd.End()).Line - fset.Position(fd.Pos()).Line + 1
		t.Funcs = append(t.Funcs, Func{Pkg: rel, File: filepath.Base(path), Name: name, Lines: lines})
	}
	return nil
}

func recvName(e ast.Expr) string {
	switch x := e.(type) {
	case *ast.StarExpr:
		return recvName(x.X)
	case *ast.IndexExpr:
		return recvName(x.X)
	case *ast.Ident:
		return x.Name
	}
	return "?"
}

// Over lists what exceeds the limits in the packages under prefixes (all
// when none): packages over maxPkg lines, files over maxFile, functions
// over maxFunc, longest first.
func (t *Tree) Over(maxPkg, maxFile, maxFunc int, prefixes ...string) (pkgs, files []string, funcs []Func) {
	in := func(p string) bool {
		if len(prefixes) == 0 {
			return true
		}
		for _, pre := range prefixes {
			if p == pre || strings.HasPrefix(p, pre+"/") {
				return true
			}
		}
		return false
	}
	for _, p := range t.sorted() {
		if !in(p.Path) {
			continue
		}
		if p.Lines > maxPkg {
			pkgs = append(pkgs, fmt.Sprintf("%s %d", p.Path, p.Lines))
		}
		for name, n := range p.Files {
			if n > maxFile {
				files = append(files, fmt.Sprintf("%s/%s %d", p.Path, name, n))
			}
		}
	}
	sort.Strings(files)
	for _, f := range t.Funcs {
		if in(f.Pkg) && f.Lines > maxFunc {
			funcs = append(funcs, f)
		}
	}
	sort.Slice(funcs, func(i, j int) bool { return funcs[i].Lines > funcs[j].Lines })
	return pkgs, files, funcs
}

// MaxFuncLines is the longest a function of the lab's packages may be.
const MaxFuncLines = 100

// LongFuncs lists the functions over max lines outside the packages under
// the excluded prefixes (the reference server's ref/), longest first.
func (t *Tree) LongFuncs(limit int, excluded ...string) []Func {
	var out []Func
	for _, f := range t.Funcs {
		if f.Lines > limit && !slices.ContainsFunc(excluded, func(pre string) bool { return f.Pkg == pre || strings.HasPrefix(f.Pkg, pre+"/") }) {
			out = append(out, f)
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Lines > out[j].Lines })
	return out
}

func (t *Tree) sorted() []*Pkg {
	var out []*Pkg
	for _, p := range t.Pkgs {
		out = append(out, p)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Path < out[j].Path })
	return out
}

// Table is one line per package: its lines, files, largest file and the
// imlab packages it imports.
func (t *Tree) Table() string {
	var b strings.Builder
	for _, p := range t.sorted() {
		big, bigN := "", 0
		for name, n := range p.Files {
			if n > bigN || (n == bigN && name < big) {
				big, bigN = name, n
			}
		}
		var imps []string
		for ip := range p.Imports {
			imps = append(imps, ip)
		}
		sort.Strings(imps)
		fmt.Fprintf(&b, "%-28s %6d lines %3d files  largest %s %d  imports %s\n", p.Path, p.Lines, len(p.Files), big, bigN, strings.Join(imps, " "))
	}
	return b.String()
}
