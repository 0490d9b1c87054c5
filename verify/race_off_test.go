//go:build !race

package verify

// raceEnabled: the race detector makes sync.Pool drop items at random, so allocation counts only hold
// without it.
const raceEnabled = false
