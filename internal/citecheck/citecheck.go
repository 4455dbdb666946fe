package citecheck

import (
	"bufio"
	"bytes"
	"fmt"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
)

// Problem is one citation of a path the repository does not hold.
type Problem struct {
	File  string // the citing file, slash-separated, relative to the root
	Line  int    // 1-based
	Cited string
}

func (p Problem) String() string { return fmt.Sprintf("%s:%d: %s", p.File, p.Line, p.Cited) }

// extensions are the file extensions that make a word a path.
var extensions = []string{".md", ".go", ".toml", ".yml", ".yaml", ".pcap", ".txt", ".json", ".png", ".sh",
	".mod", ".sum", ".html", ".css", ".js", ".svg"}

// generic are file names that stand for a kind of file, not one file of
// the repository.
var generic = map[string]bool{"fly.toml": true}

// repo is the tree being checked: its files and directories, slash-separated
// and relative to the root, and the base names of its files.
type repo struct {
	paths map[string]bool
	bases map[string]bool
	top   map[string]bool // first segments
}

// Check reads every Markdown file and every package doc comment under root
// (skipping .git) and returns the citations of paths that do not exist,
// in file and line order.
func Check(root string) ([]Problem, error) {
	rp := &repo{paths: map[string]bool{".": true}, bases: map[string]bool{}, top: map[string]bool{}}
	var docs []string
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.Name() == ".git" {
			if d.IsDir() {
				return filepath.SkipDir
			}
			return nil // a worktree's .git file
		}
		rel, err := filepath.Rel(root, p)
		if err != nil || rel == "." {
			return err
		}
		rel = filepath.ToSlash(rel)
		rp.paths[rel] = true
		rp.top[strings.SplitN(rel, "/", 2)[0]] = true
		if !d.IsDir() {
			rp.bases[d.Name()] = true
			if strings.HasSuffix(rel, ".md") || strings.HasSuffix(rel, ".go") {
				docs = append(docs, rel)
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	var out []Problem
	for _, rel := range docs {
		b, err := os.ReadFile(filepath.Join(root, filepath.FromSlash(rel)))
		if err != nil {
			return nil, err
		}
		var found []Problem
		if strings.HasSuffix(rel, ".md") {
			found = rp.markdown(rel, b)
		} else {
			found, err = rp.goDoc(rel, b)
			if err != nil {
				return nil, err
			}
		}
		out = append(out, found...)
	}
	return out, nil
}

// kind is where a word was found, which decides what counts as a path.
type kind uint8

const (
	prose kind = iota // Markdown prose, a Go doc comment
	code              // a Markdown code span or fenced block
	link              // a Markdown link target
)

// markdown checks one Markdown file.
func (rp *repo) markdown(rel string, b []byte) []Problem {
	var out []Problem
	fence := ""
	var span mdSpan
	blank, indented := true, false // the line before was blank; it was an indented code line
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(nil, 1<<20)
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		t := strings.TrimSpace(line)
		wasBlank := blank
		blank = t == ""
		if fence == "" && span.ticks == "" && t != "" && (wasBlank || indented) &&
			(strings.HasPrefix(line, "    ") || strings.HasPrefix(line, "\t")) {
			indented = true // an indented code block
			out = rp.words(out, rel, n, line, code, true)
			continue
		}
		indented = indented && t == ""
		if span.ticks == "" && (strings.HasPrefix(t, "```") || strings.HasPrefix(t, "~~~")) {
			switch {
			case fence == "":
				fence = t[:3]
			case strings.HasPrefix(t, fence):
				fence = ""
			}
			continue
		}
		if fence != "" {
			out = rp.words(out, rel, n, line, code, true)
			continue
		}
		if t == "" {
			span = mdSpan{} // a code span never crosses a blank line
			continue
		}
		out = rp.markdownLine(out, rel, n, line, &span)
	}
	return out
}

// mdSpan is a code span still open at the end of a line: its backticks.
type mdSpan struct{ ticks string }

// markdownLine splits a prose line into code spans (one may continue from
// the line before, or on the next), link targets and the rest.
func (rp *repo) markdownLine(out []Problem, rel string, n int, line string, span *mdSpan) []Problem {
	var rest strings.Builder
	for len(line) > 0 {
		switch {
		case span.ticks != "":
			end := strings.Index(line, span.ticks)
			if end < 0 {
				out = rp.words(out, rel, n, line, code, true)
				line = ""
				continue
			}
			out = rp.words(out, rel, n, line[:end], code, true)
			line = line[end+len(span.ticks):]
			span.ticks = ""
		case line[0] == '`':
			ticks := len(line) - len(strings.TrimLeft(line, "`"))
			span.ticks = line[:ticks]
			line = line[ticks:]
		case strings.HasPrefix(line, "]("):
			end := strings.IndexByte(line, ')')
			if end < 0 {
				end = len(line)
			}
			target, _, _ := strings.Cut(strings.TrimSpace(line[2:end]), " ")
			out = rp.words(out, rel, n, strings.Trim(target, "<>"), link, true)
			line = line[min(end+1, len(line)):]
		default:
			rest.WriteByte(line[0])
			line = line[1:]
		}
	}
	return rp.words(out, rel, n, rest.String(), prose, true)
}

// goDoc checks the package doc comment of one Go file.
func (rp *repo) goDoc(rel string, b []byte) ([]Problem, error) {
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, rel, b, parser.PackageClauseOnly|parser.ParseComments)
	if err != nil {
		return nil, fmt.Errorf("failed to parse %s: %w", rel, err)
	}
	if f.Doc == nil {
		return nil, nil
	}
	var out []Problem
	for _, c := range f.Doc.List {
		n := fset.Position(c.Slash).Line
		text := strings.TrimPrefix(strings.TrimPrefix(c.Text, "//"), "/*")
		for i, line := range strings.Split(strings.TrimSuffix(text, "*/"), "\n") {
			var rest strings.Builder
			for len(line) > 0 {
				before, span, ok := strings.Cut(line, "`")
				rest.WriteString(before)
				if !ok {
					break
				}
				span, after, ok := strings.Cut(span, "`")
				if !ok {
					rest.WriteString(span)
					break
				}
				out = rp.words(out, rel, n+i, span, code, false)
				line = after
			}
			out = rp.words(out, rel, n+i, rest.String(), prose, false)
		}
	}
	return out, nil
}

// words checks every word of s.
func (rp *repo) words(out []Problem, rel string, n int, s string, k kind, md bool) []Problem {
	for _, w := range strings.Fields(s) {
		p, ok := citation(w, k, rp.top)
		if !ok {
			continue
		}
		if !rp.resolves(rel, p, k, md) {
			out = append(out, Problem{File: rel, Line: n, Cited: p})
		}
	}
	return out
}

// citation reports whether w is a path citation, and the path it cites.
func citation(w string, k kind, top map[string]bool) (string, bool) {
	w = strings.TrimLeft(w, `(["'<*_`)
	for {
		t := strings.TrimSuffix(w, "/...") // a Go package pattern
		t = strings.TrimRight(t, `)]}"'>,;:.!?*_`)
		t = strings.TrimSuffix(strings.TrimSuffix(t, "'s"), "’s")
		if t == w {
			break
		}
		w = t
	}
	if i := strings.IndexByte(w, '#'); i > 0 {
		w = w[:i]
	}
	if i := strings.LastIndexByte(w, ':'); i > 0 && isDigits(w[i+1:]) {
		w = w[:i]
	}
	switch {
	case w == "", w == ".", w == "..", strings.Contains(w, "://"), strings.HasPrefix(w, "-"),
		strings.ContainsAny(w, "<>{}*$|=?@%,:\\#"):
		return "", false
	case strings.HasPrefix(w, "/"):
		return w, hasExt(w) // a route, unless it names a file: then it is outside the repository
	}
	first, _, nested := strings.Cut(w, "/")
	if nested && strings.Contains(strings.TrimLeft(first, "."), ".") {
		return "", false // an import path or a host
	}
	switch {
	case generic[w]:
		return "", false
	case k == code && strings.HasPrefix(w, "./") && !strings.Contains(w[2:], "/") && !hasExt(w):
		return "", false // a program in the working directory (go build -o x; ./x), not a file of ours
	case hasExt(w), strings.HasPrefix(w, "./"), strings.HasPrefix(w, "../"), strings.HasSuffix(w, "/"):
		return w, true
	case k != prose && nested && top[first]:
		return w, true
	}
	return "", false
}

func hasExt(w string) bool {
	base := path.Base(w)
	ext := path.Ext(base)
	return ext != base && slices.Contains(extensions, ext)
}

func isDigits(s string) bool {
	return s != "" && strings.Trim(s, "0123456789") == ""
}

// resolves reports whether cited, cited by the file rel, names a file or
// directory of the repository.
func (rp *repo) resolves(rel, cited string, k kind, md bool) bool {
	if strings.HasPrefix(cited, "/") {
		return false
	}
	dir := path.Dir(rel)
	try := func(base string) bool {
		p := path.Clean(path.Join(base, cited))
		return p != ".." && !strings.HasPrefix(p, "../") && rp.paths[p]
	}
	switch {
	case try(dir):
		return true
	case k == link || strings.HasPrefix(cited, "../"):
		return false
	case try("."):
		return true
	}
	return md && !strings.Contains(strings.TrimSuffix(cited, "/"), "/") && rp.bases[strings.TrimSuffix(cited, "/")]
}
