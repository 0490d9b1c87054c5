//go:build race

package edge_test

const raceEnabled = true
