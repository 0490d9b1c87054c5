// Package deploy holds what a production deploy of Ankusa needs besides the binary: the
// container image (Dockerfile, the config it ships), the Prometheus alert rules with their
// unit tests and the Grafana dashboard (monitoring/). It has no code; its tests are the
// guarantees those files owe the binary: every series a rule or a panel reads is one the
// binary exports, every alert fires when it should and names a runbook that exists, the
// shipped configs pass validation, and /metrics stays under 10 k series whatever the
// tenant count.
package deploy
