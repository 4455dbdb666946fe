//go:build race

package lockrank

const raceEnabled = true
