package blobtest

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"

	"github.com/ankusa-go/ankusa/storage/blob"
)

// flawed is a correct LocalFS with one method wrong, named by flaw.
type flawed struct {
	blob.Store
	flaw string
}

func (f *flawed) Put(ctx context.Context, key string, r io.Reader, size int64) error {
	switch f.flaw {
	case "truncating-put":
		size = min(size, 1<<20)
	case "short-reader-padded":
		b, _ := io.ReadAll(io.LimitReader(r, size))
		b = append(b, make([]byte, int(size)-len(b))...)
		r = bytes.NewReader(b)
	}
	return f.Store.Put(ctx, key, r, size)
}

func (f *flawed) Get(ctx context.Context, key string) (io.ReadCloser, error) {
	rc, err := f.Store.Get(ctx, key)
	if f.flaw == "missing-unclassified" && errors.Is(err, blob.ErrNotFound) {
		return nil, errors.New("no such file")
	}
	return rc, err
}

func (f *flawed) GetRange(ctx context.Context, key string, off, n int64) ([]byte, error) {
	if f.flaw == "range-clamped" {
		rc, err := f.Store.Get(ctx, key)
		if err != nil {
			return nil, err
		}
		defer rc.Close()
		b, _ := io.ReadAll(rc)
		if off > int64(len(b)) {
			return nil, nil
		}
		return b[off:min(int64(len(b)), off+n)], nil
	}
	return f.Store.GetRange(ctx, key, off, n)
}

func (f *flawed) List(ctx context.Context, prefix string, fn func(blob.Object) error) error {
	switch f.flaw {
	case "list-unsorted":
		var all []blob.Object
		if err := f.Store.List(ctx, prefix, func(o blob.Object) error { all = append(all, o); return nil }); err != nil {
			return err
		}
		slices.Reverse(all)
		for _, o := range all {
			if err := fn(o); err != nil {
				return err
			}
		}
		return nil
	case "list-ignores-boundary":
		return f.Store.List(ctx, strings.TrimSuffix(prefix, "/"), fn)
	}
	return f.Store.List(ctx, prefix, fn)
}

func (f *flawed) Delete(ctx context.Context, key string) error {
	if f.flaw == "delete-missing-fails" {
		if _, err := f.Store.GetRange(ctx, key, 0, 0); errors.Is(err, blob.ErrNotFound) {
			return errors.New("no such object")
		}
	}
	return f.Store.Delete(ctx, key)
}

// The flaw each subtest must catch.
var flaws = map[string]string{
	"truncating-put":        "PutGetByteExact",
	"short-reader-padded":   "ShortReaderFails",
	"missing-unclassified":  "MissingIsNotFound",
	"range-clamped":         "GetRange",
	"list-unsorted":         "ListKeyOrderAndPrefixBoundaries",
	"list-ignores-boundary": "ListKeyOrderAndPrefixBoundaries",
	"delete-missing-fails":  "DeleteIsIdempotent",
}

const flawEnv = "BLOBTEST_FLAW"

// TestFlawedStore is the child half of TestSuiteFailsEachFlawedStore.
func TestFlawedStore(t *testing.T) {
	flaw := os.Getenv(flawEnv)
	if flaw == "" {
		t.Skip("run by TestSuiteFailsEachFlawedStore")
	}
	Run(t, func(t *testing.T) blob.Store {
		s, err := blob.NewLocalFS(t.TempDir())
		if err != nil {
			t.Fatal(err)
		}
		return &flawed{Store: s, flaw: flaw}
	})
}

// TestSuiteFailsEachFlawedStore: the suite is only worth running if it fails a store that breaks the contract.
// Each flawed store runs the suite in a child process, which must fail the subtest that owns that guarantee.
// The correct LocalFS passes (storage/blob's TestLocalFSConformance).
func TestSuiteFailsEachFlawedStore(t *testing.T) {
	for flaw, failing := range flaws {
		t.Run(flaw, func(t *testing.T) {
			cmd := exec.Command(os.Args[0], "-test.run=^TestFlawedStore$", "-test.v")
			cmd.Env = append(os.Environ(), flawEnv+"="+flaw)
			out, err := cmd.CombinedOutput()
			if err == nil {
				t.Fatalf("the suite passed a store with flaw %s:\n%s", flaw, out)
			}
			if !strings.Contains(string(out), "--- FAIL: TestFlawedStore/"+failing) {
				t.Fatalf("flaw %s did not fail %s:\n%s", flaw, failing, out)
			}
		})
	}
}
