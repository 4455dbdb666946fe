//go:build !race

package wsframe

const raceEnabled = false
