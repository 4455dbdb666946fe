package shapecheck

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const (
	maxDocLines  = 150
	maxCoreLines = 80
	root         = "../.."
)

// goDirs returns every directory under root holding Go files, skipping
// testdata and hidden directories.
func goDirs(t *testing.T) []string {
	t.Helper()
	var dirs []string
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() {
			return nil
		}
		name := d.Name()
		if p != root && (strings.HasPrefix(name, ".") || name == "testdata" || name == "node_modules") {
			return filepath.SkipDir
		}
		if m, _ := filepath.Glob(filepath.Join(p, "*.go")); len(m) > 0 {
			dirs = append(dirs, p)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return dirs
}

// parseDir parses the non-test Go files of dir with comments.
func parseDir(t *testing.T, fset *token.FileSet, dir string) []*ast.File {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var files []*ast.File
	for _, e := range ents {
		n := e.Name()
		if !strings.HasSuffix(n, ".go") || strings.HasSuffix(n, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, filepath.Join(dir, n), nil, parser.ParseComments)
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, f)
	}
	return files
}

// Every package doc, summed over the files that carry one, stays within
// maxDocLines: history and figures belong in BENCHMARKS.md and RELIABILITY.md.
func TestPackageDocsStayShort(t *testing.T) {
	fset := token.NewFileSet()
	for _, dir := range goDirs(t) {
		lines := 0
		for _, f := range parseDir(t, fset, dir) {
			if f.Doc != nil {
				lines += fset.Position(f.Doc.End()).Line - fset.Position(f.Doc.Pos()).Line + 1
			}
		}
		if lines > maxDocLines {
			t.Errorf("%s: package doc is %d lines, more than %d", dir, lines, maxDocLines)
		}
	}
}

// No non-test function of the routing core is longer than maxCoreLines.
func TestCoreFunctionsStayShort(t *testing.T) {
	fset := token.NewFileSet()
	files := parseDir(t, fset, filepath.Join(root, "relay", "internal", "core"))
	if len(files) == 0 {
		t.Fatal("the core package has no files: the test looks in the wrong place")
	}
	for _, f := range files {
		for _, d := range f.Decls {
			fn, ok := d.(*ast.FuncDecl)
			if !ok || fn.Body == nil {
				continue
			}
			start, end := fset.Position(fn.Pos()), fset.Position(fn.End())
			if n := end.Line - start.Line + 1; n > maxCoreLines {
				t.Errorf("%s:%d: %s is %d lines, more than %d", start.Filename, start.Line, fn.Name.Name, n, maxCoreLines)
			}
		}
	}
}
