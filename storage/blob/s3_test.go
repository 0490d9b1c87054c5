package blob_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/ankusa-go/ankusa/config"
	"github.com/ankusa-go/ankusa/storage/blob"
	"github.com/ankusa-go/ankusa/storage/blob/blobtest"
	"github.com/ankusa-go/ankusa/test/fixture/s3fake"
)

func newS3(t *testing.T, c config.S3) *blob.S3 {
	t.Helper()
	s, err := blob.NewS3(context.Background(), c)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestS3Conformance(t *testing.T) {
	srv := s3fake.Start(t)
	blobtest.Run(t, func(t *testing.T) blob.Store {
		c := srv.S3()
		c.Bucket = srv.NewBucket(t)
		return newS3(t, c)
	})
}

// TestS3ErrorIsReturnedWhenServiceIsDown: an unreachable service is an error from every call — never nil,
// never ErrNotFound (a caller would take "missing" for an answer) — and it names the store, not its keys.
func TestS3ErrorIsReturnedWhenServiceIsDown(t *testing.T) {
	srv := s3fake.Start(t)
	c := srv.S3()
	c.AccessKeyID = "AKIDEXAMPLEKEY0123"
	c.SecretAccessKey = "very-secret-value-0123456789"
	c.SessionToken = "session-token-value-0123456789"
	s := newS3(t, c)
	blobtest.MustPut(t, s, "k", []byte("v"))
	srv.Close()

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	start := time.Now()
	var errs []error
	errs = append(errs, s.Put(ctx, "k", strings.NewReader("w"), 1))
	_, err := s.Get(ctx, "k")
	errs = append(errs, err)
	_, err = s.GetRange(ctx, "k", 0, 1)
	errs = append(errs, err)
	errs = append(errs, s.List(ctx, "", func(blob.Object) error { return nil }))
	errs = append(errs, s.Delete(ctx, "k"))
	t.Logf("5 calls against a closed server failed in %v", time.Since(start).Round(time.Millisecond))
	for i, err := range errs {
		if err == nil {
			t.Fatalf("call %d against a closed server returned nil", i)
		}
		if errors.Is(err, blob.ErrNotFound) {
			t.Fatalf("call %d against a closed server = %v, which matches ErrNotFound", i, err)
		}
		msg := err.Error()
		if strings.Contains(msg, c.SecretAccessKey) || strings.Contains(msg, c.SessionToken) || strings.Contains(msg, c.AccessKeyID) {
			t.Fatalf("error carries a credential: %s", msg)
		}
		if !strings.Contains(msg, "s3://"+c.Bucket) {
			t.Fatalf("error does not name the store: %s", msg)
		}
	}
	if str := s.String(); strings.Contains(str, c.SecretAccessKey) || strings.Contains(str, c.AccessKeyID) {
		t.Fatalf("String() carries a credential: %s", str)
	}
}

// TestS3MissingBucketIsNotNotFound: a missing bucket is a configuration error, not a missing object.
func TestS3MissingBucketIsNotNotFound(t *testing.T) {
	srv := s3fake.Start(t)
	c := srv.S3()
	c.Bucket = "no-such-bucket"
	s := newS3(t, c)
	_, err := s.Get(context.Background(), "k")
	if err == nil || errors.Is(err, blob.ErrNotFound) {
		t.Fatalf("Get from a missing bucket = %v, want an error other than ErrNotFound", err)
	}
}

func TestNewS3RefusesCredentialsInEndpoint(t *testing.T) {
	_, err := blob.NewS3(context.Background(), config.S3{Bucket: "b", Endpoint: "http://user:hunter2@127.0.0.1:9000"})
	if err == nil {
		t.Fatal("NewS3 accepted an endpoint with credentials")
	}
	if strings.Contains(err.Error(), "hunter2") {
		t.Fatalf("error carries the password: %v", err)
	}
}

// TestS3AccessDeniedIsForbidden: a 403 from the service matches ErrForbidden (the claim gateway answers
// store_forbidden with a long Retry-After), never ErrNotFound.
func TestS3AccessDeniedIsForbidden(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/xml")
		w.WriteHeader(http.StatusForbidden)
		if r.Method != http.MethodHead {
			_, _ = w.Write([]byte(`<?xml version="1.0" encoding="UTF-8"?><Error><Code>AccessDenied</Code><Message>Access Denied</Message></Error>`))
		}
	}))
	defer srv.Close()
	s := newS3(t, config.S3{Bucket: "b", Endpoint: srv.URL, AccessKeyID: "AKID", SecretAccessKey: "secret-secret"})
	_, err := s.GetRange(context.Background(), "k", 0, 1)
	if !errors.Is(err, blob.ErrForbidden) || errors.Is(err, blob.ErrNotFound) {
		t.Fatalf("GetRange against a 403 = %v, want ErrForbidden", err)
	}
	if err := s.Put(context.Background(), "k", strings.NewReader("x"), 1); !errors.Is(err, blob.ErrForbidden) {
		t.Fatalf("Put against a 403 = %v, want ErrForbidden", err)
	}
}

// TestS3CorruptedUploadIsRefused: Put sends Content-MD5, so bytes changed between the store and the service
// are refused by the service (BadDigest) and Put fails, rather than storing what was not written. A proxy
// flips one byte of every PutObject body.
func TestS3CorruptedUploadIsRefused(t *testing.T) {
	srv := s3fake.Start(t)
	target, err := url.Parse(srv.Endpoint)
	if err != nil {
		t.Fatal(err)
	}
	rp := httputil.NewSingleHostReverseProxy(target)
	proxy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPut {
			b, err := io.ReadAll(r.Body)
			if err != nil {
				http.Error(w, err.Error(), http.StatusBadRequest)
				return
			}
			if len(b) > 0 {
				b[len(b)/2] ^= 0x01
			}
			r.Body = io.NopCloser(bytes.NewReader(b))
		}
		rp.ServeHTTP(w, r)
	}))
	defer proxy.Close()
	c := srv.S3()
	c.Endpoint = proxy.URL
	s := newS3(t, c)
	data := blobtest.Random(t, 4096)
	if err := s.Put(context.Background(), "k", bytes.NewReader(data), int64(len(data))); err == nil {
		t.Fatal("Put of a body corrupted in transit returned nil")
	}
	if _, err := s.Get(context.Background(), "k"); !errors.Is(err, blob.ErrNotFound) {
		t.Fatalf("after a refused Put, Get = %v, want ErrNotFound", err)
	}
	if srv.Objects(t, "") != 0 {
		t.Fatal("the corrupted object was stored")
	}
}
