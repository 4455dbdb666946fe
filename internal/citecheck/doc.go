// Package citecheck finds citations of paths that are not in the
// repository: in every Markdown file and in every Go package doc comment
// (the comment on a package clause, doc.go or not). Its test runs it over
// the repository, so a document that cites a file the repository does not
// hold (a brief that lives elsewhere, a file renamed or removed since)
// fails the build.
//
// # What counts as a citation
//
// A citation is one word of the text, trimmed of the punctuation around it
// (brackets, quotes, emphasis, a trailing full stop, comma, colon or
// possessive 's), that looks like a path of the repository:
//
//   - any word whose last segment ends in a file extension the repository
//     uses (.md .go .toml .yml .yaml .pcap .txt .json .png .sh .mod .sum
//     .html .css .js .svg), with or without a directory: doc.go,
//     docs/UDP.md, litenet/testdata/session-2.1.2.pcap; but not fly.toml
//     alone, which names the kind of file Fly reads, not one of ours;
//   - any word that starts with ./ or ../;
//   - any word of one or more segments that ends with /, such as relay/;
//   - in Markdown code (an inline code span, a fenced or an indented block)
//     and in link targets, also any word with a / whose first segment is a
//     top-level entry of the repository, such as cmd/purrctl or
//     internal/clock.
//
// These are not citations, whatever they contain: URLs (a scheme's ://),
// words whose first segment holds a dot (Go import paths and hosts:
// github.com/..., golang.org/x/net, registry.fly.io/app), flags (-x,
// --x), words with template or expression characters (< > { } * $ | = ?
// @ % , or a : inside), and words that start with / (HTTP routes such as
// /v1/rooms), except that an absolute path ending in a file extension is
// always reported: nothing outside the repository may be cited. In code,
// `./x` alone (one segment, no extension) is a program a command just
// built in the working directory, not a citation.
// Environment variables and prose such as relay/balancer or and/or have no
// extension, prefix or trailing slash, so they are citations only in code.
//
// # How a citation resolves
//
// A Markdown link target, and any path that starts with ../, resolves
// against the citing file's directory only (as a browser of the
// repository resolves a link). Any other citation resolves against the
// citing file's directory (a package's own files and testdata), then
// against the repository root (where commands such as go test ./relay
// run). A bare file name in Markdown (no /) may also name a file in any
// directory ("doc.go files"); in a package doc it names the package's own
// file or one at the root. A path that climbs out of the repository never
// resolves. A #fragment, a :line suffix and a trailing /... (a Go package
// pattern) are dropped first.
package citecheck
