// Package actors is the glue between Ankusa and protoactor-go.
//
// Invariant it owns: everything an actor system needs hangs off one instance. NewSystem builds a system whose
// protoactor log lines go to that instance's zerolog logger (tagged "component":"protoactor"), with dead-letter
// logging throttled and no metrics provider (protoactor's default Prometheus provider would take over :2222 and
// the default mux). Kill, the chaos hook, is a value owned by the instance, never a package global, so two
// instances in one process never crash each other's actors.
//
// Actor names follow "<instance>/<domain>/<name>" (see Name), which keeps two instances' actors apart in one
// process and makes a PID readable in a log line.
package actors
