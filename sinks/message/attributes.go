package message

import "github.com/ankusa-go/ankusa/sinks"

// Attribute names of the broker header set (inventory D.4).
const (
	AttrID             = "ankusa_id"
	AttrSourceID       = "ankusa_source_id"
	AttrTenantID       = "ankusa_tenant_id"
	AttrVersion        = "ankusa_message_version"
	AttrIdempotencyKey = "ankusa_idempotency_key"
	AttrContentType    = "content_type"
	AttrDedupeKey      = "ankusa_dedupe_key"
	AttrReplayID       = "ankusa_replay_id"
)

// Attributes returns the broker header set of e, in the order of the constants above; an attribute whose
// value is empty is left out. Every value passes through sinks.HeaderValue: the source, tenant, dedupe key
// and content type are chosen by whoever sent the hook, and a byte a header cannot carry would make every
// publish fail (the Message document carries the exact values).
func Attributes(e *sinks.Envelope) []sinks.Header {
	out := make([]sinks.Header, 0, 8)
	add := func(name, v string) {
		if v != "" {
			out = append(out, sinks.Header{Name: name, Value: sinks.HeaderValue(v)})
		}
	}
	add(AttrID, e.Text())
	add(AttrSourceID, e.Source)
	add(AttrTenantID, e.Tenant)
	add(AttrVersion, "1")
	add(AttrIdempotencyKey, e.IdempotencyKey())
	add(AttrContentType, e.ContentType)
	add(AttrDedupeKey, e.DedupeKey)
	add(AttrReplayID, e.ReplayID)
	return out
}
