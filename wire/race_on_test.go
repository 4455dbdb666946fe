//go:build race

package wire

// raceEnabled: allocation counts mean nothing under the race detector.
const raceEnabled = true
