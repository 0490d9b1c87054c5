package backup

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"

	"github.com/ankusa-go/ankusa/storage/blob"
)

// Verify reads the backup LATEST names at s back: the manifest's signature against key, then every file's size
// and sha256. It returns the checked manifest, ErrNoBackup when there is none, or the first failure.
func Verify(ctx context.Context, s blob.Store, key []byte) (*Manifest, error) {
	id, err := readLatest(ctx, s)
	if err != nil {
		return nil, err
	}
	m, err := readManifest(ctx, s, id, key)
	if err != nil {
		return nil, err
	}
	for _, f := range m.Files {
		if err := checkObject(ctx, s, f, io.Discard); err != nil {
			return m, err
		}
	}
	return m, nil
}

// checkObject streams f's object into w, checking its size and digest. w has seen unchecked bytes when it
// fails: a restore writes into a scratch directory it removes.
func checkObject(ctx context.Context, s blob.Store, f File, w io.Writer) error {
	rc, err := s.Get(ctx, f.Key)
	if err != nil {
		return fmt.Errorf("cannot read %s: %w", f.Key, err)
	}
	defer rc.Close()
	h := sha256.New()
	// One byte more than the manifest says, so a longer object is caught without reading all of it.
	n, err := io.Copy(io.MultiWriter(h, w), io.LimitReader(rc, f.Size+1))
	if err != nil {
		return fmt.Errorf("cannot read %s: %w", f.Key, err)
	}
	if n != f.Size {
		return fmt.Errorf("%w: %s is %d bytes or more, the manifest says %d", ErrFileMismatch, f.Key, n, f.Size)
	}
	if got := hex.EncodeToString(h.Sum(nil)); got != f.SHA256 {
		return fmt.Errorf("%w: %s sha256 %s, the manifest says %s", ErrFileMismatch, f.Key, got, f.SHA256)
	}
	return nil
}
