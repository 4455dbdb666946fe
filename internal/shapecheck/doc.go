// Package shapecheck holds tests that keep the tree's shape: no package doc
// longer than a reader will hold (150 lines), and no function of the relay's
// routing core longer than one screen (80 lines). It has no code of its own;
// the limits live in its tests so that `go test ./...` enforces them.
package shapecheck
