package store

import (
	"bytes"
	"errors"
	"reflect"
	"testing"
)

func sampleHook() Hook {
	return Hook{
		ID:           [16]byte{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16},
		ReceivedAt:   1_700_000_000_123,
		Tenant:       "acme",
		Source:       "stripe",
		ContentType:  "application/json",
		Headers:      []Header{{"stripe-signature", "t=1,v1=abc"}, {"x-empty", ""}},
		Body:         []byte("{\"a\":1}\x00\xff raw bytes"),
		Flagged:      true,
		DedupeKey:    "evt_123",
		Verification: VerificationFailed,
	}
}

// Design, ingest path: "The body is stored byte-for-byte."
func TestHookCodecRoundTripsByteForByte(t *testing.T) {
	f := func(h Hook) {
		t.Helper()
		enc := AppendHook(nil, &h)
		if len(enc) != HookSize(&h) {
			t.Fatalf("HookSize %d, encoded %d bytes", HookSize(&h), len(enc))
		}
		if !bytes.Equal(enc, AppendHook(nil, &h)) {
			t.Fatal("encoding is not deterministic")
		}
		got, err := DecodeHook(enc)
		if err != nil {
			t.Fatalf("DecodeHook: %v", err)
		}
		if !reflect.DeepEqual(got, h) {
			t.Fatalf("round trip:\n got %+v\nwant %+v", got, h)
		}
		// The decoded hook shares no memory with its input (the input may be C memory freed right after).
		for i := range enc {
			enc[i] = 0xAA
		}
		if !reflect.DeepEqual(got, h) {
			t.Fatal("decoded hook changed when its input was overwritten")
		}
	}
	f(sampleHook())
	f(Hook{}) // empty strings, no headers, nil body
	big := sampleHook()
	big.Body = bytes.Repeat([]byte{0x5a}, 1<<20)
	big.Flagged = false
	f(big)
}

func TestAppendHookAppendsWithoutAllocatingWhenSized(t *testing.T) {
	h := sampleHook()
	buf := make([]byte, 0, HookSize(&h)+8)
	buf = append(buf, "prefix"...)
	allocs := testing.AllocsPerRun(100, func() {
		_ = AppendHook(buf[:6], &h)
	})
	if allocs != 0 {
		t.Fatalf("AppendHook into a sized buffer allocated %v times", allocs)
	}
	out := AppendHook(buf[:6], &h)
	if string(out[:6]) != "prefix" {
		t.Fatal("AppendHook overwrote what was in dst")
	}
}

func TestDecodeHookRefusesDamage(t *testing.T) {
	h := sampleHook()
	enc := AppendHook(nil, &h)
	f := func(name string, b []byte) {
		t.Helper()
		if _, err := DecodeHook(b); !errors.Is(err, ErrCorruptValue) {
			t.Fatalf("%s: want ErrCorruptValue, got %v", name, err)
		}
	}
	f("empty", nil)
	f("unknown version", append([]byte{3}, enc[1:]...))
	for n := 1; n < len(enc); n += 7 {
		f("truncated", enc[:n])
	}
	f("trailing byte", append(append([]byte(nil), enc...), 0))
	flag := append([]byte(nil), enc...)
	flag[len(flag)-len(h.DedupeKey)-3] = 2
	f("flagged not 0/1", flag)
	ver := append([]byte(nil), enc...)
	ver[len(ver)-1] = 4
	f("verification not 0..3", ver)
}

// Issue 8 item 7: the verification status is stored with the hook, and hooks stored before it was (version 1,
// no verification byte) still decode: flagged ones as failed, the others as unknown.
func TestHookVerificationStatusAndVersion1Hooks(t *testing.T) {
	for _, v := range []Verification{VerificationUnknown, VerificationOK, VerificationFailed, VerificationSkipped} {
		h := sampleHook()
		h.Verification, h.Flagged = v, v == VerificationFailed
		got, err := DecodeHook(AppendHook(nil, &h))
		if err != nil || got.Verification != v || got.Flagged != h.Flagged {
			t.Fatalf("%v: decoded %v flagged=%v, %v", v, got.Verification, got.Flagged, err)
		}
	}
	if VerificationOK.String() != "ok" || VerificationFailed.String() != "failed" || VerificationSkipped.String() != "skipped" || VerificationUnknown.String() != "" {
		t.Fatal("status names are the inventory's ok | failed | skipped")
	}
	// A version-1 value as the previous build wrote it: version byte 1, no verification byte at the end.
	v1 := func(h Hook) []byte {
		enc := AppendHook(nil, &h)
		enc[0] = 1
		return enc[:len(enc)-1]
	}
	for _, flagged := range []bool{true, false} {
		h := sampleHook()
		h.Flagged, h.Verification = flagged, VerificationOK
		got, err := DecodeHook(v1(h))
		if err != nil {
			t.Fatal(err)
		}
		want := VerificationUnknown
		if flagged {
			want = VerificationFailed
		}
		if got.Verification != want || got.Flagged != flagged || got.DedupeKey != h.DedupeKey || !bytes.Equal(got.Body, h.Body) {
			t.Fatalf("version 1 flagged=%v decoded %+v", flagged, got)
		}
	}
}

func FuzzDecodeHook(f *testing.F) {
	h := sampleHook()
	f.Add(AppendHook(nil, &h))
	f.Add(AppendHook(nil, &Hook{}))
	f.Add([]byte{1})
	v1 := AppendHook(nil, &h)
	v1[0] = 1
	f.Add(v1[:len(v1)-1])
	f.Add([]byte{1, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01})
	f.Fuzz(func(t *testing.T, b []byte) {
		h, err := DecodeHook(b)
		if err != nil {
			return
		}
		// Whatever decodes is a fixed point of encode∘decode.
		again, err := DecodeHook(AppendHook(nil, &h))
		if err != nil {
			t.Fatalf("re-decode: %v", err)
		}
		if !reflect.DeepEqual(normHook(again), normHook(h)) {
			t.Fatalf("re-decode differs:\n%+v\n%+v", again, h)
		}
	})
}

// normHook maps empty and nil slices together (the codec does not tell them apart).
func normHook(h Hook) Hook {
	if len(h.Body) == 0 {
		h.Body = nil
	}
	if len(h.Headers) == 0 {
		h.Headers = nil
	}
	return h
}
