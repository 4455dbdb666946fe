//go:build !race

package litenet

const raceEnabled = false
