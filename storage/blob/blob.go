// Package blob is the object-store contract the storage role (archive segments, backups) and the claim check
// write to, with its two implementations: LocalFS (a directory on this host, every write fsynced) and S3 (any
// service speaking the S3 API, path-style).
//
// Keys are '/'-separated paths of [A-Za-z0-9._=-] parts, never empty, "." or "..", and never start or end
// with '/': ValidKey checks them, and every implementation refuses another key with ErrInvalidKey before it
// touches the store, so no key can name a file outside a LocalFS root. A key that holds an object is not also
// a directory of other keys ("a/b" and "a/b/c"): a file-system store cannot hold both, and its Put of the
// second fails. The layouts of the archive, backups and claim packs never need both.
package blob

import (
	"context"
	"errors"
	"io"
)

// Store is one object store. Implementations are safe for concurrent use.
type Store interface {
	// Put writes size bytes read from r under key, replacing any object there. It returns nil only when the
	// object is durable (LocalFS: file and directory fsynced; S3: the service acknowledged it) and is then
	// visible whole: a reader never sees a partial object.
	Put(ctx context.Context, key string, r io.Reader, size int64) error
	// Get opens the object for reading. A missing object is an error matching ErrNotFound.
	Get(ctx context.Context, key string) (io.ReadCloser, error)
	// GetRange reads n bytes from offset off. A negative offset or length, or a range past the object's end, is
	// an error matching ErrInvalidRange.
	GetRange(ctx context.Context, key string, off, n int64) ([]byte, error)
	// List calls fn for every object whose key starts with prefix, in key order, until fn returns an error
	// (returned as is).
	List(ctx context.Context, prefix string, fn func(Object) error) error
	// Delete removes the object; deleting a missing object is not an error.
	Delete(ctx context.Context, key string) error
	// DeletePrefix removes every object whose key starts with prefix and returns how many it removed (a
	// prefix holding none is not an error). prefix is a valid key ending with '/', so one call never
	// removes a whole store, nor the objects of a sibling ("claims/tenant=a/" spares "claims/tenant=ab/").
	// A call that fails part-way leaves the rest for a repeated call.
	DeletePrefix(ctx context.Context, prefix string) (int, error)
	// String describes the store for logs (its kind and location), never with credentials.
	String() string
}

// Object is one listed object.
type Object struct {
	Key  string
	Size int64
}

var (
	// ErrNotFound is matched by the error of a Get or GetRange of a missing object.
	ErrNotFound = errors.New("blob: object not found")
	// ErrInvalidKey is matched by the error of any call with a key ValidKey refuses.
	ErrInvalidKey = errors.New("blob: invalid key")
	// ErrForbidden is matched by the error of a call the service refused for want of permission (S3 403): a
	// configuration problem that retrying soon will not fix.
	ErrForbidden = errors.New("blob: access denied")
	// ErrInvalidRange is matched by the error of a GetRange outside the object.
	ErrInvalidRange = errors.New("blob: range outside the object")
)

// ValidKey reports whether key is a well-formed object key (see the package comment). A List prefix may
// also end with '/' or be empty; ValidPrefix checks those.
func ValidKey(key string) bool {
	if key == "" || len(key) > 1024 {
		return false
	}
	start := 0
	for i := 0; i <= len(key); i++ {
		if i < len(key) && key[i] != '/' {
			if !keyByte(key[i]) {
				return false
			}
			continue
		}
		part := key[start:i]
		if part == "" || part == "." || part == ".." {
			return false
		}
		start = i + 1
	}
	return true
}

// ValidPrefix reports whether prefix may be passed to List: "" or a valid key, optionally followed by '/'.
func ValidPrefix(prefix string) bool {
	if prefix == "" {
		return true
	}
	if prefix[len(prefix)-1] == '/' {
		prefix = prefix[:len(prefix)-1]
	}
	return ValidKey(prefix)
}

// ValidDeletePrefix reports whether prefix may be passed to DeletePrefix: a valid key followed by '/'.
func ValidDeletePrefix(prefix string) bool {
	return len(prefix) > 1 && prefix[len(prefix)-1] == '/' && ValidKey(prefix[:len(prefix)-1])
}

// deleteListed removes, one Delete each, the objects List reports under prefix (read whole first: removing
// while a walk is under way would disturb it).
func deleteListed(ctx context.Context, s Store, prefix string) (int, error) {
	var keys []string
	if err := s.List(ctx, prefix, func(o Object) error {
		keys = append(keys, o.Key)
		return nil
	}); err != nil {
		return 0, err
	}
	for n, k := range keys {
		if err := s.Delete(ctx, k); err != nil {
			return n, err
		}
	}
	return len(keys), nil
}

func keyByte(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-' || c == '='
}
