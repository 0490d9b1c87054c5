package blob

import (
	"context"
	"fmt"
	"io"
	"strings"
)

// Prefixed returns a Store that keeps every key of s under prefix ("" returns s itself). Callers use
// unprefixed keys: Put("x") writes prefix+"x", and List reports keys with the prefix removed. The prefix is
// `part/` repeated, each part a valid key part (config's key_prefix rule).
func Prefixed(s Store, prefix string) (Store, error) {
	if prefix == "" {
		return s, nil
	}
	if !strings.HasSuffix(prefix, "/") || !ValidKey(strings.TrimSuffix(prefix, "/")) {
		return nil, fmt.Errorf("blob: cannot use key prefix %q: want parts of key bytes each ending in '/': %w", prefix, ErrInvalidKey)
	}
	return &prefixed{s: s, prefix: prefix}, nil
}

type prefixed struct {
	s      Store
	prefix string
}

// key prefixes a caller's key. The caller's key is checked here: prefix+"a/.." would not be refused below,
// and prefix+"" would name the prefix itself.
func (p *prefixed) key(op, k string) (string, error) {
	if !ValidKey(k) {
		return "", fmt.Errorf("blob: cannot %s %q in %s: %w", op, k, p, ErrInvalidKey)
	}
	return p.prefix + k, nil
}

func (p *prefixed) Put(ctx context.Context, key string, r io.Reader, size int64) error {
	k, err := p.key("put", key)
	if err != nil {
		return err
	}
	return p.s.Put(ctx, k, r, size)
}

func (p *prefixed) Get(ctx context.Context, key string) (io.ReadCloser, error) {
	k, err := p.key("get", key)
	if err != nil {
		return nil, err
	}
	return p.s.Get(ctx, k)
}

func (p *prefixed) GetRange(ctx context.Context, key string, off, n int64) ([]byte, error) {
	k, err := p.key("read", key)
	if err != nil {
		return nil, err
	}
	return p.s.GetRange(ctx, k, off, n)
}

func (p *prefixed) List(ctx context.Context, prefix string, fn func(Object) error) error {
	if !ValidPrefix(prefix) {
		return fmt.Errorf("blob: cannot list %q in %s: %w", prefix, p, ErrInvalidKey)
	}
	return p.s.List(ctx, p.prefix+prefix, func(o Object) error {
		o.Key = strings.TrimPrefix(o.Key, p.prefix)
		return fn(o)
	})
}

func (p *prefixed) Delete(ctx context.Context, key string) error {
	k, err := p.key("delete", key)
	if err != nil {
		return err
	}
	return p.s.Delete(ctx, k)
}

func (p *prefixed) DeletePrefix(ctx context.Context, prefix string) (int, error) {
	if !ValidDeletePrefix(prefix) {
		return 0, fmt.Errorf("blob: cannot delete under %q in %s: %w", prefix, p, ErrInvalidKey)
	}
	return p.s.DeletePrefix(ctx, p.prefix+prefix)
}

func (p *prefixed) String() string { return p.s.String() + " under " + p.prefix }
