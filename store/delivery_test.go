package store

import (
	"errors"
	"testing"
)

func TestDeliveryRowRoundTrips(t *testing.T) {
	for _, r := range []DeliveryRow{
		{},
		{SinkIndex: 3, SinkType: "kafka", State: StatePending, Attempts: 84, DueAt: 1_700_000_000_000, Size: 1 << 20},
		{SinkIndex: 65535, SinkType: "", State: 255, Attempts: 1<<32 - 1, DueAt: -1, Size: 1<<32 - 1},
	} {
		got, err := DecodeDeliveryRow(AppendDeliveryRow(nil, &r))
		if err != nil || got != r {
			t.Fatalf("round trip %+v: got %+v, %v", r, got, err)
		}
	}
	r := DeliveryRow{SinkType: "http"}
	enc := AppendDeliveryRow(nil, &r)
	for n := 0; n < len(enc); n++ {
		if _, err := DecodeDeliveryRow(enc[:n]); !errors.Is(err, ErrCorruptValue) {
			t.Fatalf("truncated to %d: want ErrCorruptValue, got %v", n, err)
		}
	}
	if _, err := DecodeDeliveryRow(append(enc, 0)); !errors.Is(err, ErrCorruptValue) {
		t.Fatalf("trailing byte: want ErrCorruptValue, got %v", err)
	}
}

func FuzzDecodeDeliveryRow(f *testing.F) {
	f.Add(AppendDeliveryRow(nil, &DeliveryRow{SinkIndex: 1, SinkType: "http", Attempts: 2, DueAt: 3, Size: 4}))
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
