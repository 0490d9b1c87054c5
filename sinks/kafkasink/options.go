package kafkasink

import (
	"crypto/tls"
	"crypto/x509"
	"net"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/ankusa-go/ankusa/config"
	"github.com/ankusa-go/ankusa/sinks"
)

// Type is the YAML `type` of this sink.
const Type = "kafka"

// Defaults (inventory D.2).
const (
	DefaultInlineMaxBytes = 65536
	DefaultMaxRecordBytes = 1_000_000
	DefaultProduceTimeout = 5 * time.Second
	// DefaultKey is the record key: one tenant's hooks of one source land on one partition, in order.
	DefaultKey = "{tenant}/{source_id}"
)

// settings is a validated sink entry.
type settings struct {
	brokers        []string
	topic          string
	key            sinks.Template
	inlineMax      int
	maxRecord      int
	produceTimeout time.Duration
	idempotent     bool
	sasl           sasl.Mechanism // nil: no SASL
	tls            *tls.Config    // nil: plaintext
}

// parse validates spec's options; every problem is a *sinks.OptionError naming the option, never its value.
func parse(spec config.SinkSpec) (settings, error) {
	o := sinks.NewOptions(Type, spec.Options)
	var s settings

	if list, ok := o.Strings("brokers"); !ok || len(list) == 0 {
		o.Fail("brokers", "is required (a list of host:port)")
	} else {
		for i, b := range list {
			host, port, err := net.SplitHostPort(b)
			if n, perr := strconv.Atoi(port); err != nil || host == "" || perr != nil || n < 1 || n > 65535 {
				o.Fail("brokers["+strconv.Itoa(i)+"]", "must be host:port")
				continue
			}
			s.brokers = append(s.brokers, b)
		}
	}
	if s.topic = o.RequiredString("topic"); s.topic != "" && !validTopic(s.topic) {
		o.Fail("topic", "must be 1..249 characters of [a-zA-Z0-9._-], not . or ..")
	}
	var ok bool
	if s.key, ok = sinks.ParseTemplate(o.String("key", DefaultKey)); !ok {
		o.Fail("key", "placeholders are {"+strings.Join(sinks.TemplateFields, "}, {")+"}; braces must pair")
	}
	s.inlineMax = o.Int("inline_max_bytes", DefaultInlineMaxBytes, 1, 64<<20)
	s.maxRecord = o.Int("max_record_bytes", DefaultMaxRecordBytes, 1024, 64<<20)
	s.produceTimeout = time.Duration(o.Int("produce_timeout_ms", int(DefaultProduceTimeout/time.Millisecond), 1000, 600_000)) * time.Millisecond
	s.idempotent = o.Bool("idempotent", false)
	s.sasl = parseSASL(o)
	s.tls = parseTLS(o, spec.Options["tls"])
	return s, o.Err()
}

// parseSASL reads `sasl: {mechanism: plain|scram_sha_256|scram_sha_512, username, password}`.
func parseSASL(o *sinks.Options) sasl.Mechanism {
	m, ok := o.StringMap("sasl")
	if !ok {
		return nil
	}
	user, pass := m["username"], m["password"]
	if user == "" {
		o.Fail("sasl.username", "is required")
	}
	if pass == "" {
		o.Fail("sasl.password", "is required")
	}
	for k := range m {
		if k != "mechanism" && k != "username" && k != "password" {
			o.Fail("sasl."+k, "unknown option")
		}
	}
	if user == "" || pass == "" {
		return nil
	}
	switch m["mechanism"] {
	case "plain":
		return plain.Auth{User: user, Pass: pass}.AsMechanism()
	case "scram_sha_256":
		return scram.Auth{User: user, Pass: pass}.AsSha256Mechanism()
	case "scram_sha_512":
		return scram.Auth{User: user, Pass: pass}.AsSha512Mechanism()
	default:
		o.Fail("sasl.mechanism", "must be one of plain|scram_sha_256|scram_sha_512")
		return nil
	}
}

// parseTLS reads `tls: true` (system roots) or `tls: {ca_file, cert_file, key_file, server_name}`.
func parseTLS(o *sinks.Options, raw any) *tls.Config {
	if _, isBool := raw.(bool); isBool {
		if o.Bool("tls", false) {
			return &tls.Config{MinVersion: tls.VersionTLS12}
		}
		return nil
	}
	m, ok := o.StringMap("tls")
	if !ok {
		return nil
	}
	c := &tls.Config{MinVersion: tls.VersionTLS12, ServerName: m["server_name"]}
	for k := range m {
		switch k {
		case "ca_file", "cert_file", "key_file", "server_name":
		default:
			o.Fail("tls."+k, "unknown option")
		}
	}
	if f := m["ca_file"]; f != "" {
		pem, err := os.ReadFile(f)
		pool := x509.NewCertPool()
		if err != nil || !pool.AppendCertsFromPEM(pem) {
			o.Fail("tls.ca_file", "cannot be read as PEM certificates")
		} else {
			c.RootCAs = pool
		}
	}
	if cf, kf := m["cert_file"], m["key_file"]; cf != "" || kf != "" {
		cert, err := tls.LoadX509KeyPair(cf, kf)
		if err != nil {
			o.Fail("tls.cert_file", "cannot be loaded with tls.key_file as a key pair")
		} else {
			c.Certificates = []tls.Certificate{cert}
		}
	}
	return c
}

// validTopic is Kafka's rule for topic names.
func validTopic(t string) bool {
	if len(t) > 249 || t == "." || t == ".." {
		return false
	}
	for i := 0; i < len(t); i++ {
		c := t[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '.' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}
