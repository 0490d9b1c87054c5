// Package config builds the typed configuration of one Ankusa instance.
//
// Invariant: a *Config handed out by Load, Resolve or Parse has passed Validate. A configuration with any
// problem is refused as a whole, never half-applied: every problem (unknown key, wrong type, bad enum, value
// out of range, cross-key rule) is reported at once, each named by its dotted key path, and the binary exits
// with ExitConfig (78, EX_CONFIG).
//
// The pipeline is: parse YAML into a node tree → interpolate ${VAR} in scalar string values → walk the tree
// strictly over the yaml tags of the Config types, on top of Default() → apply ANKUSA_* environment overrides
// (env beats file) → Validate. Defaults live in one place (defaults.go). The walk is driven by reflection, so
// adding a section is adding a struct field with a yaml tag (and, for a keyed section with per-entry
// defaults, an applyDefaults method on its element type). A field tagged `config:"secret"` is never echoed
// in a problem message and is printed as "[REDACTED]" by Redacted; a subtree tagged `config:"noecho"`
// (sources) is never echoed in problems either.
//
// Secrets are never printed: problem messages about sink options and secret fields say which key is wrong,
// never its value.
package config
