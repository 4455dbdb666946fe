//go:build race

package lockrank

// raceEnabled: the race detector is on (fast.go leaves every lock to
// sync, which tells the detector).
const raceEnabled = true
