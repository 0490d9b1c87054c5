package store

import (
	"encoding/binary"
	"errors"
	"testing"
)

func TestDeliveryRowRoundTrips(t *testing.T) {
	for _, r := range []DeliveryRow{
		{},
		{SinkIndex: 3, SinkType: "kafka", State: StatePending, Attempts: 84, DueAt: 1_700_000_000_000, Size: 1 << 20},
		{SinkIndex: 65535, SinkType: "", State: 255, Attempts: 1<<32 - 1, DueAt: -1, Size: 1<<32 - 1},
		{SinkIndex: 1, SinkType: "http", State: StateDead, Attempts: 7, DueAt: 5, Size: 9, Source: "github",
			Ordered: true, ReceivedAt: 4, LastError: "{sink, http, 503}", DeadReason: "gave up", DeadAt: 6,
			ReplayID: "0190a0b0-0000-7000-8000-000000000000"},
	} {
		got, err := DecodeDeliveryRow(AppendDeliveryRow(nil, &r))
		if err != nil || got != r {
			t.Fatalf("round trip %+v: got %+v, %v", r, got, err)
		}
	}
	r := DeliveryRow{SinkType: "http", Source: "s"}
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
	bad[0] = 3
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
	if err != nil || got != want {
		t.Fatalf("version 1 row: got %+v, %v; want %+v", got, err, want)
	}
	if _, err := DecodeDeliveryRow(append(v1, 0)); !errors.Is(err, ErrCorruptValue) {
		t.Fatalf("version 1 row with trailing bytes: %v", err)
	}
}

func FuzzDecodeDeliveryRow(f *testing.F) {
	f.Add(AppendDeliveryRow(nil, &DeliveryRow{SinkIndex: 1, SinkType: "http", Attempts: 2, DueAt: 3, Size: 4}))
	f.Add(AppendDeliveryRow(nil, &DeliveryRow{Source: "s", Ordered: true, LastError: "e", ReplayID: "r"}))
	f.Add([]byte{1, 0, 0, 0xff, 0xff})
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := DecodeDeliveryRow(b)
		if err != nil {
			return
		}
		again, err := DecodeDeliveryRow(AppendDeliveryRow(nil, &r))
		if err != nil || again != r {
			t.Fatalf("re-decode of %+v: %+v, %v", r, again, err)
		}
	})
}
