package admin

import (
	"encoding/json"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"github.com/ankusa-go/ankusa/config"
	"github.com/ankusa-go/ankusa/lifecycle"
	"github.com/ankusa-go/ankusa/sinks"
	"github.com/ankusa-go/ankusa/sinks/rabbitsink"
	"github.com/ankusa-go/ankusa/sources"
)

// AsyncAPIContentType is the media type of GET /asyncapi.json.
const AsyncAPIContentType = "application/asyncapi+json"

// The AsyncAPI 3.0 document (inventory H.5): one server per broker or HTTP host, one channel per destination
// address, one message per publisher of that channel (a source, or the lifecycle publisher), one send
// operation per channel. Maps marshal with sorted keys, so the same sinks give the same bytes.
type asyncDoc struct {
	AsyncAPI           string                    `json:"asyncapi"`
	Info               asyncInfo                 `json:"info"`
	DefaultContentType string                    `json:"defaultContentType"`
	Servers            map[string]asyncServer    `json:"servers"`
	Channels           map[string]asyncChannel   `json:"channels"`
	Operations         map[string]asyncOperation `json:"operations"`
	Components         asyncComponents           `json:"components"`
}

type asyncInfo struct {
	Title       string `json:"title"`
	Version     string `json:"version"`
	Description string `json:"description"`
}

type asyncServer struct {
	Host     string `json:"host"`
	Protocol string `json:"protocol"`
}

type asyncRef struct {
	Ref string `json:"$ref"`
}

type asyncParameter struct {
	Description string `json:"description"`
}

type asyncChannel struct {
	Address     string                    `json:"address"`
	Description string                    `json:"description"`
	Servers     []asyncRef                `json:"servers,omitempty"`
	Parameters  map[string]asyncParameter `json:"parameters,omitempty"`
	Messages    map[string]asyncRef       `json:"messages"`
}

type asyncOperation struct {
	Action   string     `json:"action"`
	Channel  asyncRef   `json:"channel"`
	Messages []asyncRef `json:"messages"`
}

type asyncMessage struct {
	Name        string      `json:"name"`
	Title       string      `json:"title"`
	ContentType string      `json:"contentType"`
	Headers     *jsonSchema `json:"headers,omitempty"`
	Payload     *jsonSchema `json:"payload"`
}

type asyncComponents struct {
	Schemas  map[string]*jsonSchema  `json:"schemas"`
	Messages map[string]asyncMessage `json:"messages"`
}

// jsonSchema is the subset of JSON Schema the document uses.
type jsonSchema struct {
	Ref                  string                 `json:"$ref,omitempty"`
	Type                 any                    `json:"type,omitempty"` // a name, or a list of names
	Description          string                 `json:"description,omitempty"`
	Const                any                    `json:"const,omitempty"`
	Enum                 []any                  `json:"enum,omitempty"`
	Format               string                 `json:"format,omitempty"`
	Pattern              string                 `json:"pattern,omitempty"`
	ContentEncoding      string                 `json:"contentEncoding,omitempty"`
	ContentMediaType     string                 `json:"contentMediaType,omitempty"`
	Properties           map[string]*jsonSchema `json:"properties,omitempty"`
	Required             []string               `json:"required,omitempty"`
	AdditionalProperties *jsonSchema            `json:"additionalProperties,omitempty"`
	AllOf                []*jsonSchema          `json:"allOf,omitempty"`
}

func ref(path string) *jsonSchema { return &jsonSchema{Ref: path} }

func str(desc string) *jsonSchema { return &jsonSchema{Type: "string", Description: desc} }

func nullableStr(desc string) *jsonSchema {
	return &jsonSchema{Type: []string{"string", "null"}, Description: desc}
}

// Component names of the document.
const (
	schemaMessageV1     = "SinkMessageV1"
	schemaAttributes    = "SinkAttributes"
	schemaHTTPHeaders   = "HTTPDeliveryHeaders"
	schemaCloudEvent    = "LifecycleCloudEvent"
	schemaWebhookBody   = "WebhookBody"
	lifecyclePublisher  = "ankusa.lifecycle" // a source id holds no dot: no source can take this name
	componentsSchemas   = "#/components/schemas/"
	componentsMessages  = "#/components/messages/"
	transportQueue      = "queue" // Message v1 with broker attributes
	transportQueueNoHdr = "pubsub"
	transportHTTP       = "http" // the body verbatim with X-Ankusa-* headers
)

// asyncSchemas are the message schemas every document carries (sinks/message Message v1, its broker
// attributes, the HTTP sink's headers, the lifecycle CloudEvent).
func asyncSchemas() map[string]*jsonSchema {
	return map[string]*jsonSchema{
		schemaMessageV1: {
			Type:        "object",
			Description: "Message v1 (package sinks/message): the JSON document every queue sink publishes. Consumers ignore keys they do not know; exactly one of body_base64 and claim is present.",
			Required: []string{"v", "id", "source_id", "tenant_id", "received_at", "content_type", "size", "sha256",
				"dedupe_key", "replay_id", "idempotency_key", "headers", "verification", "instance"},
			Properties: map[string]*jsonSchema{
				"v":               {Type: "integer", Const: 1, Description: "message version"},
				"id":              {Type: "string", Format: "uuid", Description: "hook id"},
				"source_id":       str("source id"),
				"tenant_id":       nullableStr("tenant, null when the hook has none"),
				"received_at":     {Type: "integer", Description: "unix milliseconds"},
				"content_type":    nullableStr("the hook's Content-Type"),
				"size":            {Type: "integer", Description: "length of the hook body in bytes (inline or claimed)"},
				"sha256":          {Type: "string", Pattern: "^[0-9a-f]{64}$", Description: "SHA-256 of the hook body"},
				"dedupe_key":      nullableStr("the provider's event key, when the source dedupes"),
				"replay_id":       nullableStr("set when the delivery is a replay"),
				"idempotency_key": str("what a consumer deduplicates on: tenant:source:dedupe_key, else the id; #replay:<id> for a replay"),
				"headers": {Type: "object", AdditionalProperties: &jsonSchema{Type: "string"},
					Description: "forwarded provider headers, names lowercased, repeats joined with \", \""},
				"verification": {Type: []string{"string", "null"}, Enum: []any{"ok", "failed", "skipped", nil}},
				"instance":     nullableStr("the publishing instance"),
				"body_base64":  {Type: "string", ContentEncoding: "base64", Description: "the body, when inline"},
				"claim": {Type: "string", Pattern: "^urn:ankusa:claim:v1:",
					Description: "claim ref of a body over inline_max_bytes, redeemed at the claim gateway"},
			},
		},
		schemaAttributes: {
			Type:        "object",
			Description: "broker attributes beside Message v1 (Kafka record headers, NATS and AMQP headers, SQS and Pub/Sub attributes); an empty one is left out",
			Required:    []string{"ankusa_id", "ankusa_source_id", "ankusa_message_version", "ankusa_idempotency_key"},
			Properties: map[string]*jsonSchema{
				"ankusa_id":              str("hook id"),
				"ankusa_source_id":       str("source id"),
				"ankusa_tenant_id":       str("tenant"),
				"ankusa_message_version": {Type: "string", Const: "1"},
				"ankusa_idempotency_key": str("what a consumer deduplicates on"),
				"content_type":           str("the hook's Content-Type"),
				"ankusa_dedupe_key":      str("the provider's event key"),
				"ankusa_replay_id":       str("set on a replay"),
			},
		},
		schemaHTTPHeaders: {
			Type:        "object",
			Description: "headers of the HTTP sink's request (docs/delivery.md); forwarded provider headers besides",
			Required:    []string{"X-Ankusa-Id", "X-Ankusa-Source", "X-Ankusa-Idempotency-Key"},
			Properties: map[string]*jsonSchema{
				"X-Ankusa-Id":              str("hook id"),
				"X-Ankusa-Source":          str("source id"),
				"X-Ankusa-Tenant":          str("tenant, when set"),
				"X-Ankusa-Idempotency-Key": str("tenant:source:dedupe_key, else the id; #replay:<id> for a replay"),
				"X-Ankusa-Dedupe-Key":      str("when set"),
				"X-Ankusa-Replay-Id":       str("when set"),
				"X-Ankusa-Verification":    {Type: "string", Enum: []any{"ok", "failed", "skipped"}},
				"Webhook-Id":               str("with the sink's secret: Standard Webhooks signing"),
				"Webhook-Timestamp":        str("with the sink's secret"),
				"Webhook-Signature":        str("with the sink's secret"),
			},
		},
		schemaCloudEvent: {
			Type:        "object",
			Description: "a lifecycle event: CloudEvents 1.0, JSON format; data is the subject's redacted entity",
			Required:    []string{"specversion", "id", "source", "type", "subject", "time", "datacontenttype", "revision"},
			Properties: map[string]*jsonSchema{
				"specversion": {Type: "string", Const: "1.0"},
				"id":          str("stable across redeliveries: <node>-<audit seq>"),
				"source":      str("ankusa/<node>"),
				"type": {Type: "string", Enum: []any{"io.ankusa.source.created", "io.ankusa.source.updated",
					"io.ankusa.source.deleted", "io.ankusa.route.created", "io.ankusa.route.updated",
					"io.ankusa.route.deleted", "io.ankusa.tenant.deleted"}},
				"subject":         str("the changed object"),
				"time":            {Type: "string", Format: "date-time"},
				"datacontenttype": {Type: "string", Const: "application/json"},
				"tenant":          str("extension: the tenant the subject belongs to"),
				"revision":        {Type: "integer", Description: "extension: the subject's revision"},
				"data":            {Type: "object", Description: "the redacted entity, absent on a delete"},
			},
		},
		schemaWebhookBody: {Description: "the hook body as the provider sent it, byte for byte"},
	}
}

// publisher is what sends to a channel: a source, or the lifecycle publisher.
type publisher struct {
	name, tenant string // name: a source id, or lifecyclePublisher
}

// channelKey is one destination: its servers and address.
type channelKey struct {
	typ, address string
	servers      string // the server ids, joined by " "
}

// destination is what one sink entry publishes to, from its redacted options.
type destination struct {
	transport string
	servers   []asyncServer
	address   string
}

// describeSink says where sink s publishes for publisher p (false: a sink with no destination outside the
// node, log, or a type the document does not know). It reads the redacted view only.
func describeSink(s config.SinkSpec, p publisher) (destination, bool) {
	r := config.RedactedSink(s)
	get := func(k string) string { v, _ := r[k].(string); return v }
	list := func(k string) []string {
		switch v := r[k].(type) {
		case string:
			return []string{v}
		case []any:
			var out []string
			for _, e := range v {
				if s, ok := e.(string); ok {
					out = append(out, s)
				}
			}
			return out
		}
		return nil
	}
	d := destination{transport: transportQueue}
	switch s.Type {
	case "http":
		u, ok := parsedURL(get("url"))
		if !ok {
			return d, false
		}
		d.transport, d.address = transportHTTP, u.EscapedPath()
		if d.address == "" {
			d.address = "/"
		}
		d.servers = []asyncServer{{Host: u.Host, Protocol: u.Scheme}}
	case "kafka":
		proto := "kafka"
		if r["tls"] != nil {
			proto = "kafka-secure"
		}
		for _, b := range list("brokers") {
			d.servers = append(d.servers, asyncServer{Host: hostOf(b), Protocol: proto})
		}
		d.address = get("topic")
	case "rabbitmq":
		u, ok := parsedURL(get("url"))
		if !ok {
			return d, false
		}
		d.servers = []asyncServer{{Host: u.Host, Protocol: u.Scheme}}
		key := rabbitsink.DefaultRoutingKey
		if k, ok := r["routing_key"].(string); ok {
			key = k
		}
		src := p.name
		if p.name == lifecyclePublisher {
			src = lifecycle.SourceID
		}
		key = strings.ReplaceAll(key, "{source_id}", src)
		if p.tenant != "" { // the lifecycle publisher's tenant is the event's: left a parameter
			key = strings.ReplaceAll(key, "{tenant}", p.tenant)
		}
		d.address = key
		if ex := get("exchange"); ex != "" {
			d.address = ex + "/" + key
		}
	case "nats":
		for _, sv := range list("servers") {
			proto := "nats"
			if strings.HasPrefix(sv, "tls://") {
				proto = "nats-tls"
			}
			d.servers = append(d.servers, asyncServer{Host: hostOf(sv), Protocol: proto})
		}
		d.address = get("subject")
	case "redis":
		u, ok := parsedURL(get("url"))
		if !ok {
			return d, false
		}
		d.transport = transportQueueNoHdr
		d.servers = []asyncServer{{Host: u.Host, Protocol: "redis"}}
		d.address = get("channel")
	case "sqs":
		u, ok := parsedURL(get("queue_url"))
		if !ok {
			return d, false
		}
		d.servers = []asyncServer{{Host: u.Host, Protocol: "sqs"}}
		d.address = u.Scheme + "://" + u.Host + u.EscapedPath()
	case "google_pubsub":
		host := "pubsub.googleapis.com"
		if ep := get("endpoint"); ep != "" {
			host = hostOf(ep)
		}
		d.servers = []asyncServer{{Host: host, Protocol: "googlepubsub"}}
		d.address = get("topic")
		if !strings.HasPrefix(d.address, "projects/") {
			d.address = "projects/" + get("project") + "/topics/" + d.address
		}
	default:
		return d, false
	}
	return d, d.address != ""
}

// parsedURL parses a redacted URL (RedactURL keeps scheme, host and path only; the query, names alone, is
// dropped here).
func parsedURL(s string) (*url.URL, bool) {
	u, err := url.Parse(s)
	if err != nil || u.Host == "" {
		return nil, false
	}
	return u, true
}

// hostOf is the host:port of a broker entry written as a URL or as host:port (already without userinfo).
func hostOf(s string) string {
	if u, ok := parsedURL(s); ok && strings.Contains(s, "://") {
		return u.Host
	}
	return s
}

// docID maps text to the characters AsyncAPI allows in a component, channel or message id (server ids
// take no dot: serverID).
func docID(s string) string {
	b := []byte(s)
	for i, c := range b {
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '_' || c == '-' || c == '.') {
			b[i] = '_'
		}
	}
	return string(b)
}

// buildAsyncAPI builds the document of the sinks of srcs (every source p may see) and, for a principal of
// every tenant, of lifecycle.sinks.
func buildAsyncAPI(cfg *config.Config, version string, srcs []sources.Entry, withLifecycle bool) asyncDoc {
	if version == "" {
		version = "dev"
	}
	doc := asyncDoc{
		AsyncAPI: "3.0.0",
		Info: asyncInfo{Title: "Ankusa " + cfg.Instance, Version: version,
			Description: "Channels node " + cfg.Instance + " publishes to, built from its sinks as they are now: " +
				"queue sinks send Message v1, the HTTP sink the hook body with X-Ankusa-* headers. Delivery is at " +
				"least once: consumers deduplicate on the idempotency key."},
		DefaultContentType: "application/json",
		Servers:            map[string]asyncServer{},
		Channels:           map[string]asyncChannel{},
		Operations:         map[string]asyncOperation{},
		Components:         asyncComponents{Schemas: asyncSchemas(), Messages: map[string]asyncMessage{}},
	}
	type use struct {
		dest destination
		pubs []publisher
	}
	uses := map[channelKey]*use{}
	add := func(s config.SinkSpec, p publisher) {
		d, ok := describeSink(s, p)
		if !ok {
			return
		}
		ids := make([]string, 0, len(d.servers))
		for _, sv := range d.servers {
			id := strings.ReplaceAll(docID(sv.Protocol+"-"+sv.Host), ".", "_")
			doc.Servers[id] = sv
			ids = append(ids, id)
		}
		slices.Sort(ids)
		ids = slices.Compact(ids)
		k := channelKey{typ: s.Type, address: d.address, servers: strings.Join(ids, " ")}
		u := uses[k]
		if u == nil {
			u = &use{dest: d}
			uses[k] = u
		}
		if !slices.Contains(u.pubs, p) {
			u.pubs = append(u.pubs, p)
		}
	}
	for _, e := range srcs {
		for _, s := range e.Source.Sinks {
			add(s, publisher{name: e.Name, tenant: e.Tenant})
		}
	}
	if withLifecycle {
		for _, s := range cfg.Lifecycle.Sinks {
			add(s, publisher{name: lifecyclePublisher})
		}
	}
	keys := make([]channelKey, 0, len(uses))
	for k := range uses {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b channelKey) int {
		return strings.Compare(a.typ+"\x00"+a.servers+"\x00"+a.address, b.typ+"\x00"+b.servers+"\x00"+b.address)
	})
	for _, k := range keys {
		u := uses[k]
		id := docID(k.typ + "-" + strings.Trim(k.address, "/"))
		for n := 2; ; n++ {
			if _, taken := doc.Channels[id]; !taken {
				break
			}
			id = docID(k.typ+"-"+strings.Trim(k.address, "/")) + "-" + strconv.Itoa(n)
		}
		ch := asyncChannel{Address: k.address, Messages: map[string]asyncRef{},
			Description: k.typ + " sink destination"}
		if k.servers != "" {
			for _, sid := range strings.Split(k.servers, " ") {
				ch.Servers = append(ch.Servers, asyncRef{Ref: "#/servers/" + sid})
			}
		}
		// A placeholder left in the address is filled per hook (a routing key naming {id}, say).
		for _, f := range sinks.TemplateFields {
			if strings.Contains(k.address, "{"+f+"}") {
				if ch.Parameters == nil {
					ch.Parameters = map[string]asyncParameter{}
				}
				ch.Parameters[f] = asyncParameter{Description: "the hook's " + f}
			}
		}
		op := asyncOperation{Action: "send", Channel: asyncRef{Ref: "#/channels/" + id}}
		slices.SortFunc(u.pubs, func(a, b publisher) int { return strings.Compare(a.name, b.name) })
		for _, p := range u.pubs {
			mid := docID(u.dest.transport + "." + p.name)
			doc.Components.Messages[mid] = asyncMessageFor(u.dest.transport, p)
			ch.Messages[docID(p.name)] = asyncRef{Ref: componentsMessages + mid}
			op.Messages = append(op.Messages, asyncRef{Ref: "#/channels/" + id + "/messages/" + docID(p.name)})
		}
		doc.Channels[id] = ch
		doc.Operations["send-"+id] = op
	}
	return doc
}

// asyncMessageFor is the message publisher p sends over a transport: Message v1 narrowed to the source (the
// lifecycle publisher's body is a CloudEvent), or, over HTTP, the body itself.
func asyncMessageFor(transport string, p publisher) asyncMessage {
	body := ref(componentsSchemas + schemaWebhookBody)
	contentType := "application/json"
	narrow := &jsonSchema{Type: "object", Properties: map[string]*jsonSchema{"source_id": {Const: p.name}}}
	title := "hooks of source " + p.name
	if p.name == lifecyclePublisher {
		body = ref(componentsSchemas + schemaCloudEvent)
		narrow.Properties["source_id"] = &jsonSchema{Const: lifecycle.SourceID}
		narrow.Properties["content_type"] = &jsonSchema{Const: lifecycle.ContentType}
		narrow.Properties["body_base64"] = &jsonSchema{ContentMediaType: lifecycle.ContentType,
			Description: "the CloudEvent (components.schemas." + schemaCloudEvent + ")"}
		title = "lifecycle events"
	} else if p.tenant != "" {
		narrow.Properties["tenant_id"] = &jsonSchema{Const: p.tenant}
	}
	m := asyncMessage{Name: p.name, Title: title, ContentType: contentType}
	switch transport {
	case transportHTTP:
		m.Headers = ref(componentsSchemas + schemaHTTPHeaders)
		m.Payload = body
		if p.name == lifecyclePublisher {
			m.ContentType = lifecycle.ContentType
		} else {
			m.ContentType = "application/octet-stream"
		}
	case transportQueue:
		m.Headers = ref(componentsSchemas + schemaAttributes)
		fallthrough
	default:
		m.Payload = &jsonSchema{AllOf: []*jsonSchema{ref(componentsSchemas + schemaMessageV1), narrow}}
	}
	return m
}

// asyncAPI serves the AsyncAPI document of the channels the node publishes to. A tenant-scoped principal
// sees its tenants' sources only, and no lifecycle channel (lifecycle events span every tenant).
func (a *api) asyncAPI(w http.ResponseWriter, _ *http.Request, p *principal) {
	var srcs []sources.Entry
	if a.d.Sources != nil {
		all, err := a.d.Sources.List("")
		if err != nil {
			a.failed(w, "asyncapi", err)
			return
		}
		srcs = all
	} else {
		for id, s := range a.d.Config.Sources {
			t := s.Tenant
			if t == "" {
				t = "default"
			}
			srcs = append(srcs, sources.Entry{Tenant: t, Name: id, Source: s, Static: true})
		}
	}
	srcs = slices.DeleteFunc(srcs, func(e sources.Entry) bool { return !p.sees(e.Tenant) })
	doc := buildAsyncAPI(a.d.Config, a.d.Version, srcs, p.allTenants)
	w.Header().Set("Content-Type", AsyncAPIContentType)
	w.WriteHeader(http.StatusOK)
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(doc)
}
