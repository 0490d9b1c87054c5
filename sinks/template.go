package sinks

import "strings"

// TemplateFields are the placeholders a Template may name: {tenant} (DefaultTenant when the hook has none),
// {source_id}, {id}, {dedupe_key} and {idempotency_key}.
var TemplateFields = []string{"tenant", "source_id", "id", "dedupe_key", "idempotency_key"}

// Template is a parsed option value such as a Kafka key or an AMQP routing key, "{tenant}/{source_id}": text
// with placeholders for envelope fields. The zero value expands to "".
type Template struct{ parts []templatePart }

// templatePart is a literal (field == "") or one envelope field.
type templatePart struct{ lit, field string }

// ParseTemplate parses s; ok is false for an unknown placeholder or an unpaired brace.
func ParseTemplate(s string) (t Template, ok bool) {
	for s != "" {
		open := strings.IndexByte(s, '{')
		if end := strings.IndexByte(s, '}'); end >= 0 && (open < 0 || end < open) {
			return Template{}, false
		}
		if open < 0 {
			t.parts = append(t.parts, templatePart{lit: s})
			break
		}
		if open > 0 {
			t.parts = append(t.parts, templatePart{lit: s[:open]})
		}
		end := strings.IndexByte(s[open:], '}')
		if end < 0 {
			return Template{}, false
		}
		field := s[open+1 : open+end]
		known := false
		for _, f := range TemplateFields {
			known = known || f == field
		}
		if !known {
			return Template{}, false
		}
		t.parts = append(t.parts, templatePart{field: field})
		s = s[open+end+1:]
	}
	return t, true
}

// Append appends the template expanded for e to dst. Field values are copied as they are: a destination that
// cannot carry some byte of them checks the result itself.
func (t Template) Append(dst []byte, e *Envelope) []byte {
	for _, p := range t.parts {
		switch p.field {
		case "":
			dst = append(dst, p.lit...)
		case "tenant":
			if e.Tenant == "" {
				dst = append(dst, DefaultTenant...)
			} else {
				dst = append(dst, e.Tenant...)
			}
		case "source_id":
			dst = append(dst, e.Source...)
		case "id":
			dst = append(dst, e.Text()...)
		case "dedupe_key":
			dst = append(dst, e.DedupeKey...)
		case "idempotency_key":
			dst = append(dst, e.IdempotencyKey()...)
		}
	}
	return dst
}
