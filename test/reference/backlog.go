package reference

import (
	"crypto/rand"
	"fmt"
	"time"

	"github.com/rs/zerolog"

	"github.com/ankusa-go/ankusa/store"
)

// SeedBacklog commits n hooks of 1 KiB (source sample, tenant default, one sink of type typ) into the store at
// dir, in groups the size the edge's group commit reaches under load, and closes it. The backlog benchmarks
// start an instance or Deliver on it afterwards.
func SeedBacklog(dir, typ string, n int) error {
	db, err := store.Open(store.Options{Dir: dir, Log: zerolog.Nop()})
	if err != nil {
		return fmt.Errorf("cannot open the store: %w", err)
	}
	const group = 1024
	body := make([]byte, 1024)
	copy(body, `{"event":"backlog","pad":"`)
	for i := 26; i < len(body)-2; i++ {
		body[i] = 'a' + byte(i%26)
	}
	copy(body[len(body)-2:], `"}`)
	sinks := []store.SinkBinding{{Index: 0, Type: typ}}
	recs := make([]*store.Record, 0, group)
	for done := 0; done < n; {
		recs = recs[:0]
		now := time.Now()
		for i := 0; i < group && done < n; i++ {
			h := store.Hook{ID: BacklogID(now), ReceivedAt: now.UnixMilli(), Tenant: "default", Source: "sample",
				ContentType: "application/json", Headers: []store.Header{{Name: "x-github-event", Value: "push"}},
				Body: body, Verification: store.VerificationSkipped}
			recs = append(recs, &store.Record{ID: h.ID, Tenant: h.Tenant, Source: h.Source, ReceivedAt: h.ReceivedAt,
				Size: uint32(len(body)), Value: store.AppendHook(nil, &h), Sinks: sinks})
			done++
		}
		if _, err := db.CommitHooks(recs); err != nil {
			_ = db.Close()
			return fmt.Errorf("cannot commit the backlog: %w", err)
		}
	}
	return db.Close()
}

// BacklogID is a UUIDv7 as the edge mints them: the ids must differ (JetStream deduplicates by Nats-Msg-Id,
// which is the hook id; the sink recorder counts distinct ids).
func BacklogID(now time.Time) [16]byte {
	var id [16]byte
	_, _ = rand.Read(id[6:])
	ms := uint64(now.UnixMilli())
	for i := range 6 { // 48 bits of unix milliseconds, big-endian
		id[i] = byte(ms >> (40 - 8*i))
	}
	id[6] = id[6]&0x0f | 0x70
	id[8] = id[8]&0x3f | 0x80
	return id
}
