//go:build race

package balancer

// raceEnabled: allocation counts mean nothing under the race detector.
const raceEnabled = true
