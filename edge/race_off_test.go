//go:build !race

package edge_test

// raceEnabled: the race detector keeps shadow memory beside every byte the process
// touches, so resident-memory bounds only hold without it (they run in make test's
// non-race pass).
const raceEnabled = false
