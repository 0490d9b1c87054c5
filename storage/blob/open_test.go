package blob_test

import (
	"context"
	"errors"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/ankusa-go/ankusa/config"
	"github.com/ankusa-go/ankusa/storage/blob"
	"github.com/ankusa-go/ankusa/storage/blob/blobtest"
	"github.com/ankusa-go/ankusa/test/fixture/s3fake"
)

func open(t *testing.T, c config.BlobStore) blob.Store {
	t.Helper()
	s, err := blob.Open(context.Background(), c)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// The prefix wrapper passes the suite over both stores: callers see unprefixed keys.
func TestPrefixedConformance(t *testing.T) {
	t.Run("local", func(t *testing.T) {
		blobtest.Run(t, func(t *testing.T) blob.Store {
			return open(t, config.BlobStore{Type: config.BlobLocal, Root: t.TempDir(), KeyPrefix: "node-a/x.y/"})
		})
	})
	t.Run("s3", func(t *testing.T) {
		srv := s3fake.Start(t)
		blobtest.Run(t, func(t *testing.T) blob.Store {
			c := srv.BlobStore("node-a/")
			c.S3.Bucket = srv.NewBucket(t)
			return open(t, c)
		})
	})
}

// TestOpenAppliesKeyPrefix: key_prefix is applied by the store Open builds (so callers use unprefixed keys),
// and only there: the same bucket opened without it sees the full keys; two prefixes do not see each other.
func TestOpenAppliesKeyPrefix(t *testing.T) {
	srv := s3fake.Start(t)
	a := open(t, srv.BlobStore("node-a/"))
	b := open(t, srv.BlobStore("node-b/"))
	whole := open(t, srv.BlobStore(""))
	blobtest.MustPut(t, a, "archive/v1/x", []byte("from a"))
	blobtest.MustPut(t, b, "archive/v1/x", []byte("from b"))
	if got := blobtest.Keys(t, whole, ""); !slices.Equal(got, []string{"node-a/archive/v1/x", "node-b/archive/v1/x"}) {
		t.Fatalf("unprefixed List = %v", got)
	}
	if got := blobtest.Keys(t, a, ""); !slices.Equal(got, []string{"archive/v1/x"}) {
		t.Fatalf("List under node-a/ = %v, want [archive/v1/x]", got)
	}
	if got := string(blobtest.MustGet(t, b, "archive/v1/x")); got != "from b" {
		t.Fatalf("Get under node-b/ = %q", got)
	}
	if srv.Objects(t, "node-a/") != 1 {
		t.Fatal("the object under node-a/ is not in the bucket under that prefix")
	}
	if !strings.Contains(a.String(), "node-a/") {
		t.Fatalf("String() = %q does not name the prefix", a.String())
	}
	// A key that is invalid on its own stays invalid under a prefix ("node-a/" + "x/.." is not a key either,
	// but "node-a/" + "" would name the prefix).
	for _, k := range []string{"", "..", "x/.."} {
		if err := a.Put(context.Background(), k, strings.NewReader("x"), 1); !errors.Is(err, blob.ErrInvalidKey) {
			t.Fatalf("Put(%q) under a prefix = %v, want ErrInvalidKey", k, err)
		}
	}
}

func TestOpenRefuses(t *testing.T) {
	ctx := context.Background()
	for name, c := range map[string]config.BlobStore{
		"unknown type":    {Type: "gcs"},
		"bad prefix":      {Type: config.BlobLocal, Root: t.TempDir(), KeyPrefix: "../"},
		"prefix no slash": {Type: config.BlobLocal, Root: t.TempDir(), KeyPrefix: "a"},
		"empty root":      {Type: config.BlobLocal},
		"no bucket":       {Type: config.BlobS3},
	} {
		if s, err := blob.Open(ctx, c); err == nil {
			t.Errorf("%s: Open = %v, want an error", name, s)
		}
	}
	l := open(t, config.BlobStore{Type: config.BlobLocal, Root: filepath.Join(t.TempDir(), "deep", "root")})
	blobtest.MustPut(t, l, "k", []byte("v"))
}
