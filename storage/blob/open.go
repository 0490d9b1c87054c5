package blob

import (
	"context"
	"fmt"

	"github.com/ankusa-go/ankusa/config"
)

// Open builds the store a config section names, with its key_prefix applied (Prefixed).
func Open(ctx context.Context, c config.BlobStore) (Store, error) {
	var s Store
	switch c.Type {
	case config.BlobLocal, "":
		l, err := NewLocalFS(c.Root)
		if err != nil {
			return nil, err
		}
		s = l
	case config.BlobS3:
		s3, err := NewS3(ctx, c.S3)
		if err != nil {
			return nil, err
		}
		s = s3
	default:
		return nil, fmt.Errorf("blob: cannot open a store of type %q (want local or s3)", c.Type)
	}
	return Prefixed(s, c.KeyPrefix)
}
