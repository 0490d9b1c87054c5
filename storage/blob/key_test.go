package blob

import "testing"

func TestValidKey(t *testing.T) {
	for _, k := range []string{"a", "archive/v1/dt=2026-12-03/n1/seg-1-9.seg", "backup/LATEST", "claims/tenant=t_1/dt=2026-12-03/01ABC"} {
		if !ValidKey(k) {
			t.Errorf("ValidKey(%q) = false, want true", k)
		}
	}
	for _, k := range []string{"", "/a", "a/", "a//b", "../a", "a/../b", "a/./b", ".", "..", "a b", "a\\b", "a\x00", "é"} {
		if ValidKey(k) {
			t.Errorf("ValidKey(%q) = true, want false", k)
		}
	}
	for _, p := range []string{"", "archive/", "archive/v1"} {
		if !ValidPrefix(p) {
			t.Errorf("ValidPrefix(%q) = false, want true", p)
		}
	}
	for _, p := range []string{"/", "../", "a//"} {
		if ValidPrefix(p) {
			t.Errorf("ValidPrefix(%q) = true, want false", p)
		}
	}
}

func FuzzValidKey(f *testing.F) {
	f.Add("archive/v1/x")
	f.Add("../etc/passwd")
	f.Fuzz(func(t *testing.T, k string) {
		if !ValidKey(k) {
			return
		}
		for i := 0; i < len(k); i++ {
			if !keyByte(k[i]) && k[i] != '/' {
				t.Fatalf("ValidKey(%q) accepted byte %q", k, k[i])
			}
		}
		if k[0] == '/' || k[len(k)-1] == '/' {
			t.Fatalf("ValidKey(%q) accepted an absolute or trailing-slash key", k)
		}
	})
}
