// Package telemetry turns what the components report into metrics and logs.
//
// Components call the typed methods of *Telemetry (Ingest, Refused, Commit, LoadShed,
// Subtree, the dispatch side's Attempt, Parked, DispatchGauges and replay methods, the
// sampled IngestQueue and StoreNextSeq); they never touch a Prometheus collector
// themselves, so wiring another backend is a change here only. The admin listener
// serves Handler. Every collector lives on the instance's own registry, never the
// global one, so two instances in one process keep separate series, and every series
// carries the instance label. No label value comes from unauthenticated input:
// refusals before the source is known are counted by reason only.
//
// The sub-package task owns background goroutines for every other package.
package telemetry
