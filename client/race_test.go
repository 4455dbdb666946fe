//go:build race

package client

// raceEnabled: the race detector makes sync.Pool drop items at random and
// adds allocations of its own, so allocation counts are checked without it.
const raceEnabled = true
