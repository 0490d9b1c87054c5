// Package fleet counts tenant quotas and provider event keys in a Redis every node of a fleet shares
// (rate_limits.scope fleet, dedupe.scope fleet; docs/configuration.md, "Fleet scope").
//
// A hook costs one call (Admit: a script that takes from the tenant's hooks and bytes buckets and claims the
// event key pending, all on Redis's clock), bounded by fleet.timeout_ms. After the commit the claim is made
// committed (Commit) or released (Release). A breaker takes a slow or dead store out of the path: Admit then
// answers ok=false at once and the caller limits and dedupes on its own; Degraded reports the breaker open
// (ankusa_fleet_limiter_degraded).
package fleet
