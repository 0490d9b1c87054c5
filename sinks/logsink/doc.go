// Package logsink writes one structured log line per delivered hook (sink type "log").
//
// Invariant: a delivery logs metadata only — id, source, tenant, size, content type, attempt (and the replay id
// when set) — never the body or the headers, which may hold personal data or credentials. The log keeps
// nothing a consumer can rely on, so the sink is not durable (inventory D.6: it cannot be a source's only
// confirmer under wal.type none). Deliver never fails, except that it refuses an attempt whose context is
// already done or a sink already closed: nil must mean "logged".
package logsink
