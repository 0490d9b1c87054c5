// Package builtin assembles the registry of the sinks shipped with Ankusa.
//
// Invariant: NewRegistry returns a fresh *sinks.Registry per call, so each instance in a process owns its sink
// set. It lives apart from package sinks because the sink packages import sinks (for Envelope and the error
// classes); sinks importing them back would be a cycle.
package builtin
