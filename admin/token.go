package admin

import (
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// LocalTokenFile is the name of the token file a node started on the embedded default config writes in its
// instance directory (<data_dir>/<instance>/admin.token).
const LocalTokenFile = "admin.token"

// EnsureLocalToken makes sure path holds a token: 32 random bytes, base64url, mode 0600. An existing file is
// kept as it is (created once, so a CLI that read it keeps working across restarts). created reports whether
// this call wrote it.
func EnsureLocalToken(path string) (created bool, err error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o750); err != nil {
		return false, fmt.Errorf("admin: cannot create the directory of the local token: %w", err)
	}
	var raw [32]byte
	if _, err := rand.Read(raw[:]); err != nil {
		return false, fmt.Errorf("admin: cannot draw a local token: %w", err)
	}
	// O_EXCL: two instances racing on one data dir cannot both write, and an existing token is never replaced.
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if errors.Is(err, fs.ErrExist) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("admin: cannot create the local token file: %w", err)
	}
	_, werr := f.WriteString(base64.RawURLEncoding.EncodeToString(raw[:]) + "\n")
	if werr == nil {
		werr = f.Sync()
	}
	if cerr := f.Close(); werr == nil {
		werr = cerr
	}
	if werr != nil {
		_ = os.Remove(path)
		return false, fmt.Errorf("admin: cannot write the local token file: %w", werr)
	}
	return true, nil
}
