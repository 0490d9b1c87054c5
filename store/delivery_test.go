package store

import (
	"encoding/binary"
	"errors"
	"reflect"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestDeliveryRowRoundTrips(t *testing.T) {
	for _, r := range []DeliveryRow{
		{},
		{SinkIndex: 3, SinkType: "kafka", State: StatePending, Attempts: 84, DueAt: 1_700_000_000_000, Size: 1 << 20},
		{SinkIndex: 65535, SinkType: "", State: 255, Attempts: 1<<32 - 1, DueAt: -1, Size: 1<<32 - 1},
		{SinkIndex: 1, SinkType: "http", State: StateDead, Attempts: 7, DueAt: 5, Size: 9, Source: "github",
			Ordered: true, ReceivedAt: 4, LastError: "{sink, http, 503}", DeadReason: "gave up", DeadAt: 6,
			ReplayID: "0190a0b0-0000-7000-8000-000000000000"},
		{SinkType: "http", Attempts: 2, History: []Attempt{
			{Number: 1, StartedAt: 1_700_000_000_000, LatencyUS: 1500, Class: AttemptTransient, Status: 503, Error: "503"},
			{Number: 2, StartedAt: -1, LatencyUS: 1<<32 - 1, Class: AttemptPermanent, Status: 65535, Error: ""}}},
	} {
		got, err := DecodeDeliveryRow(AppendDeliveryRow(nil, &r))
		if err != nil || !reflect.DeepEqual(got, r) {
			t.Fatalf("round trip %+v: got %+v, %v", r, got, err)
		}
	}
	r := DeliveryRow{SinkType: "http", Source: "s", History: []Attempt{{Number: 1, Error: "e"}}}
	enc := AppendDeliveryRow(nil, &r)
	for n := 0; n < len(enc); n++ {
		if _, err := DecodeDeliveryRow(enc[:n]); !errors.Is(err, ErrCorruptValue) {
			t.Fatalf("truncated to %d: want ErrCorruptValue, got %v", n, err)
		}
	}
	if _, err := DecodeDeliveryRow(append(enc, 0)); !errors.Is(err, ErrCorruptValue) {
		t.Fatalf("trailing byte: want ErrCorruptValue, got %v", err)
	}
	bad := append([]byte(nil), enc...)
	bad[0] = deliveryVersion + 1
	if _, err := DecodeDeliveryRow(bad); !errors.Is(err, ErrCorruptValue) {
		t.Fatalf("unknown version: want ErrCorruptValue, got %v", err)
	}
}

// Rows written before dispatch existed (version 1) are still read, with the later fields zero.
func TestDeliveryRowVersion1IsStillRead(t *testing.T) {
	v1 := []byte{deliveryV1, 0, 2, 4, 'h', 't', 't', 'p', StatePending}
	v1 = binary.BigEndian.AppendUint32(v1, 3)
	v1 = binary.BigEndian.AppendUint64(v1, 1_700_000_000_000)
	v1 = binary.BigEndian.AppendUint32(v1, 99)
	got, err := DecodeDeliveryRow(v1)
	want := DeliveryRow{SinkIndex: 2, SinkType: "http", State: StatePending, Attempts: 3, DueAt: 1_700_000_000_000, Size: 99}
	if err != nil || !reflect.DeepEqual(got, want) {
		t.Fatalf("version 1 row: got %+v, %v; want %+v", got, err, want)
	}
	if _, err := DecodeDeliveryRow(append(v1, 0)); !errors.Is(err, ErrCorruptValue) {
		t.Fatalf("version 1 row with trailing bytes: %v", err)
	}
}

// Rows written before the attempt history (version 2) are still read, with no history; rewritten, they are
// version 3 and keep every field.
func TestDeliveryRowVersion2IsStillRead(t *testing.T) {
	v2 := []byte{deliveryV2, 0, 1, 4, 'h', 't', 't', 'p', StateDead}
	v2 = binary.BigEndian.AppendUint32(v2, 7)
	v2 = binary.BigEndian.AppendUint64(v2, 5)
	v2 = binary.BigEndian.AppendUint32(v2, 9)
	v2 = appendStr(v2, "github")
	v2 = append(v2, 1)
	v2 = binary.BigEndian.AppendUint64(v2, 4)
	v2 = appendStr(v2, "{sink, http, 503}")
	v2 = appendStr(v2, "gave up")
	v2 = binary.BigEndian.AppendUint64(v2, 6)
	v2 = appendStr(v2, "r1")
	want := DeliveryRow{SinkIndex: 1, SinkType: "http", State: StateDead, Attempts: 7, DueAt: 5, Size: 9, Source: "github",
		Ordered: true, ReceivedAt: 4, LastError: "{sink, http, 503}", DeadReason: "gave up", DeadAt: 6, ReplayID: "r1"}
	got, err := DecodeDeliveryRow(v2)
	if err != nil || !reflect.DeepEqual(got, want) {
		t.Fatalf("version 2 row: got %+v, %v; want %+v", got, err, want)
	}
	if _, err := DecodeDeliveryRow(append(v2, 0)); !errors.Is(err, ErrCorruptValue) {
		t.Fatalf("version 2 row with trailing bytes: %v", err)
	}
	again := AppendDeliveryRow(nil, &got)
	if again[0] != deliveryVersion {
		t.Fatalf("rewritten row has version %d", again[0])
	}
	if back, err := DecodeDeliveryRow(again); err != nil || !reflect.DeepEqual(back, want) {
		t.Fatalf("version 2 row rewritten: %+v, %v", back, err)
	}
}

// The history keeps the last MaxHistory attempts, each error cut to MaxAttemptError bytes of valid UTF-8; a
// stored count above MaxHistory is damage.
func TestAttemptHistoryIsBounded(t *testing.T) {
	var h []Attempt
	long := strings.Repeat("é", MaxAttemptError) // 2 bytes each: a cut at an odd byte splits one
	for i := uint32(1); i <= 25; i++ {
		prev := h
		h = withAttempt(h, Attempt{Number: i, Error: "x" + long})
		if len(prev) > 0 && &prev[0] == &h[0] {
			t.Fatal("withAttempt reused the claimed row's history")
		}
	}
	if len(h) != MaxHistory || h[0].Number != 25-MaxHistory+1 || h[MaxHistory-1].Number != 25 {
		t.Fatalf("history %d long, from %d to %d", len(h), h[0].Number, h[len(h)-1].Number)
	}
	for _, a := range h {
		if len(a.Error) > MaxAttemptError || !utf8.ValidString(a.Error) || !strings.HasPrefix(a.Error, "xé") {
			t.Fatalf("error %d bytes, valid %v: %q", len(a.Error), utf8.ValidString(a.Error), a.Error)
		}
	}
	if got := cutError("bad\xff\xfe"); !utf8.ValidString(got) {
		t.Fatalf("invalid UTF-8 kept: %q", got)
	}
	r := DeliveryRow{History: append(h, h...)} // encoding keeps the last MaxHistory too
	got, err := DecodeDeliveryRow(AppendDeliveryRow(nil, &r))
	if err != nil || !reflect.DeepEqual(got.History, h) {
		t.Fatalf("encoded history: %v, %v", got.History, err)
	}
	enc := AppendDeliveryRow(nil, &DeliveryRow{})
	enc[len(enc)-1] = MaxHistory + 1
	if _, err := DecodeDeliveryRow(enc); !errors.Is(err, ErrCorruptValue) {
		t.Fatalf("history count above the bound: %v", err)
	}
}

func FuzzDecodeDeliveryRow(f *testing.F) {
	f.Add(AppendDeliveryRow(nil, &DeliveryRow{SinkIndex: 1, SinkType: "http", Attempts: 2, DueAt: 3, Size: 4}))
	f.Add(AppendDeliveryRow(nil, &DeliveryRow{Source: "s", Ordered: true, LastError: "e", ReplayID: "r"}))
	f.Add(AppendDeliveryRow(nil, &DeliveryRow{History: []Attempt{{Number: 1, Class: AttemptTimeout, Error: "t"}}}))
	f.Add([]byte{1, 0, 0, 0xff, 0xff})
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := DecodeDeliveryRow(b)
		if err != nil {
			return
		}
		again, err := DecodeDeliveryRow(AppendDeliveryRow(nil, &r))
		if err != nil || !reflect.DeepEqual(again, r) {
			t.Fatalf("re-decode of %+v: %+v, %v", r, again, err)
		}
	})
}

// The cost of the history on the claim (decode) and outcome (encode) paths: a row without one, and a row with
// a full history of 200-byte errors.
func BenchmarkDeliveryRowCodec(b *testing.B) {
	full := DeliveryRow{SinkType: "http", Source: "s", Attempts: 12, LastError: strings.Repeat("e", 200)}
	for i := uint32(1); i <= MaxHistory; i++ {
		full.History = withAttempt(full.History, Attempt{Number: i, StartedAt: 1, LatencyUS: 1, Class: AttemptTransient,
			Status: 503, Error: strings.Repeat("e", 300)})
	}
	for _, bc := range []struct {
		name string
		r    DeliveryRow
	}{{"history=0", DeliveryRow{SinkType: "http", Source: "s", Attempts: 1}}, {"history=10", full}} {
		b.Run(bc.name, func(b *testing.B) {
			var buf []byte
			b.ReportAllocs()
			for b.Loop() {
				buf = AppendDeliveryRow(buf[:0], &bc.r)
				if _, err := DecodeDeliveryRow(buf); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(len(buf)), "bytes/row")
		})
	}
}
