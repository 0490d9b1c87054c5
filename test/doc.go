// Package test holds the black-box tests: the ankusa binary as a child process
// (kill -9 loses no acked hook) and whole instances in one process (two instances
// share nothing), plus the shared fixtures they use.
package test
