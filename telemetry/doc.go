// Package telemetry turns what the components report into metrics and logs.
//
// Components call the typed methods of *Telemetry (Ingest, Refused, Commit, LoadShed,
// Subtree); they never touch a Prometheus collector themselves, so wiring another
// backend is a change here only. Every collector lives on the instance's own registry,
// never the global one, so two instances in one process keep separate series, and
// every series carries the instance label. No label value comes from unauthenticated
// input: refusals before the source is known are counted by reason only.
package telemetry
