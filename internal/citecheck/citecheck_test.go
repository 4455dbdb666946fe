package citecheck

import (
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// The repository's own documents cite only what it holds.
func TestRepositoryCitesOnlyItsOwnFiles(t *testing.T) {
	probs, err := Check(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range probs {
		t.Errorf("%s: cites a path that is not in the repository", p)
	}
}

// tree writes files (slash-separated path -> content) under a new
// directory and returns it.
func tree(t *testing.T, files map[string]string) string {
	t.Helper()
	root := t.TempDir()
	for p, content := range files {
		f := filepath.Join(root, filepath.FromSlash(p))
		if err := os.MkdirAll(filepath.Dir(f), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(f, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return root
}

// base is a small repository the cases cite into.
var base = map[string]string{
	"go.mod":                           "module example.com/x\n",
	"docs/B.md":                        "# B\n",
	"relay/core.go":                    "package relay\n",
	"litenet/testdata/session.pcap":    "",
	"internal/clock/clock.go":          "package clock\n",
	"cmd/purrctl/main.go":              "package main\n",
	"fly/relay.toml":                   "",
	"balancer/testdata/fuzz/FuzzX/abc": "",
}

func check(t *testing.T, file, content string) []string {
	t.Helper()
	files := maps.Clone(base)
	files[file] = content
	probs, err := Check(tree(t, files))
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, p := range probs {
		if p.File != file {
			t.Errorf("a problem in %s, which the case did not write: %s", p.File, p)
		}
		got = append(got, p.Cited)
	}
	return got
}

// Citations of paths the repository does not hold fire, in Markdown and in
// package doc comments: a brief kept elsewhere, a file renamed away.
func TestMissingPathsFire(t *testing.T) {
	for _, c := range []struct {
		name, file, content string
		want                []string
	}{
		{"a brief in a code span", "README.md", "The behaviour is `briefs/product-spec.txt`, sentence by sentence.\n",
			[]string{"briefs/product-spec.txt"}},
		{"a brief directory", "docs/A.md", "See `briefs/` for the product documents.\n", []string{"briefs/"}},
		{"a brief's vectors in prose", "docs/A.md", "Every datagram is in captures/VECTORS.md.\n", []string{"captures/VECTORS.md"}},
		{"a link out of the repository", "docs/A.md", "The [design](../outside/DESIGN.md) says so.\n", []string{"../outside/DESIGN.md"}},
		{"a climb in code", "docs/A.md", "Copied from `../outside/`.\n", []string{"../outside/"}},
		{"an absolute path", "docs/A.md", "Read `/srv/briefs/UDP.md` first.\n", []string{"/srv/briefs/UDP.md"}},
		{"a link resolves from its own directory", "docs/A.md", "[B](docs/B.md)\n", []string{"docs/B.md"}},
		{"a code span across lines", "docs/A.md", "Run `go test\n./relay/oldpkg` now.\n", []string{"./relay/oldpkg"}},
		{"a renamed file in a package doc", "relay/doc.go", "// Package relay routes (relay/oldfile.go).\npackage relay\n",
			[]string{"relay/oldfile.go"}},
		{"a package's own file, renamed", "relay/doc.go", "// Package relay: see core.go and oldfile.go.\npackage relay\n",
			[]string{"oldfile.go"}},
		{"a doc that names the wrong directory", "balancer/doc.go", "// Package balancer serves PROTOCOL.md section 3.\npackage balancer\n",
			[]string{"PROTOCOL.md"}},
		{"a fenced block", "docs/A.md", "```\ngo run ./cmd/oldtool\ninternal/gone\n```\n", []string{"./cmd/oldtool", "internal/gone"}},
		{"an indented block", "README.md", "Build it:\n\n    go build -o purrctl ./cmd/gone\n    ./purrctl smoke\n", []string{"./cmd/gone"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := check(t, c.file, c.content); !slices.Equal(got, c.want) {
				t.Errorf("problems %q, want %q", got, c.want)
			}
		})
	}
}

// Words that are not path citations, and citations that resolve, are
// quiet.
func TestOtherWordsAreQuiet(t *testing.T) {
	md := strings.Join([]string{
		"Routes: `/v1/rooms`, `GET /migration/current`, `POST /v1/instances/{id}/drain`.",
		"Imports: `github.com/purrfly/purrfly/relay`, `golang.org/x/net/ipv4`, `coder/websocket`, x/net.",
		"Flags and variables: `--udp-port`, `-race`, `UDP_PORT_V2`, `PURRFLY_SCREENSHOT=$PWD/docs/a.png`.",
		"Other: `text/event-stream`, https://example.com/docs/x.md, `ws://host:port`, `registry.fly.io/app:v1`.",
		"Prose: the relay/balancer secret, and/or, an app's fly.toml, e.g. `k=v`, `fan-in|fan-out`, [top](#top).",
		"Templates: `testdata/fuzz/<FuzzName>/`, `*.md`.",
		"Real: relay/core.go, `relay/`, `cmd/purrctl`, `internal/clock`, `fly/relay.toml`, [B](B.md), [core](../relay/core.go#L1),",
		"docs/B.md, `go test -race ./relay/...`, doc.go files, core.go:12, the file README.md's reader (this file).",
		"```",
		"relay ──> internal/clock, wire",
		"```",
		"",
		"    go build -o purrctl ./cmd/purrctl",
		"    ./purrctl smoke --balancer http://127.0.0.1:8080",
	}, "\n")
	files := maps.Clone(base)
	files["docs/A.md"] = md
	files["README.md"] = "# x\n"
	files["litenet/doc.go"] = "// Package litenet is checked against testdata/session.pcap (docs/B.md).\n" +
		"// Its import path is github.com/x/y/litenet; see `purrctl bench`.\npackage litenet\n"
	probs, err := Check(tree(t, files))
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range probs {
		t.Errorf("%s: not a missing path", p)
	}
}
