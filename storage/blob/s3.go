package blob

import (
	"bytes"
	"context"
	"crypto/md5"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"

	"github.com/aws/aws-sdk-go-v2/aws"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	awsconfig "github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/aws/smithy-go"

	"github.com/ankusa-go/ankusa/config"
)

// S3 is a Store in one bucket of a service speaking the S3 API (AWS, MinIO, R2, ...), addressed path-style.
// A Put returns nil once the service acknowledged the whole object; S3 objects appear whole or not at all.
type S3 struct {
	client *s3.Client
	bucket string
	desc   string
}

// NewS3 builds the client for bucket c.Bucket. With c.AccessKeyID it signs with those static keys; without, it
// uses the standard AWS credential chain (environment, shared files, instance role). It does not contact the
// service: a wrong bucket or key shows in the first call.
func NewS3(ctx context.Context, c config.S3) (*S3, error) {
	if c.Bucket == "" {
		return nil, errors.New("blob: cannot open s3 store: bucket is empty")
	}
	desc := "s3://" + c.Bucket
	if c.Endpoint != "" {
		u, err := url.Parse(c.Endpoint)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return nil, fmt.Errorf("blob: cannot open %s: endpoint must be an http(s) URL", desc)
		}
		if u.User != nil {
			// Credentials in the URL would end up in errors and logs; they belong in access_key_id/secret.
			return nil, fmt.Errorf("blob: cannot open %s: endpoint must not carry credentials", desc)
		}
		desc += " at " + u.Scheme + "://" + u.Host + u.Path
	}
	region := c.Region
	if region == "" {
		region = "us-east-1"
	}
	opts := []func(*awsconfig.LoadOptions) error{awsconfig.WithRegion(region)}
	if c.AccessKeyID != "" {
		opts = append(opts, awsconfig.WithCredentialsProvider(
			credentials.NewStaticCredentialsProvider(c.AccessKeyID, c.SecretAccessKey, c.SessionToken)))
	}
	ac, err := awsconfig.LoadDefaultConfig(ctx, opts...)
	if err != nil {
		return nil, fmt.Errorf("blob: cannot open %s: load AWS configuration: %w", desc, err)
	}
	client := s3.NewFromConfig(ac, func(o *s3.Options) {
		o.UsePathStyle = true
		if c.Endpoint != "" {
			o.BaseEndpoint = aws.String(c.Endpoint)
		}
		// A checksum only when the operation requires one: S3-compatible services differ in the trailing
		// checksums the SDK sends by default; the TLS connection and Content-Length guard the bytes.
		o.RequestChecksumCalculation = aws.RequestChecksumCalculationWhenRequired
		o.ResponseChecksumValidation = aws.ResponseChecksumValidationWhenRequired
	})
	return &S3{client: client, bucket: c.Bucket, desc: desc}, nil
}

// String names the bucket and endpoint, never credentials.
func (s *S3) String() string { return s.desc }

// Put uploads the object in one PutObject.
func (s *S3) Put(ctx context.Context, key string, r io.Reader, size int64) error {
	if !ValidKey(key) {
		return fmt.Errorf("blob: cannot put %q in %s: %w", key, s, ErrInvalidKey)
	}
	if size < 0 {
		return fmt.Errorf("blob: cannot put %s in %s: negative size %d", key, s, size)
	}
	body, err := seekableBody(r, size)
	if err != nil {
		return fmt.Errorf("blob: cannot put %s in %s: %w", key, s, err)
	}
	// Content-MD5 makes the service refuse bytes that differ from those read here (BadDigest), whatever the
	// transport and the SDK's own checksum settings.
	h := md5.New()
	if _, err := io.Copy(h, body); err != nil {
		return fmt.Errorf("blob: cannot put %s in %s: read: %w", key, s, err)
	}
	if _, err := body.Seek(0, io.SeekStart); err != nil {
		return fmt.Errorf("blob: cannot put %s in %s: rewind: %w", key, s, err)
	}
	_, err = s.client.PutObject(ctx, &s3.PutObjectInput{
		Bucket:        aws.String(s.bucket),
		Key:           aws.String(key),
		Body:          body,
		ContentLength: aws.Int64(size),
		ContentMD5:    aws.String(base64.StdEncoding.EncodeToString(h.Sum(nil))),
		ContentType:   aws.String("application/octet-stream"),
	})
	if err != nil {
		return fmt.Errorf("blob: cannot put %s in %s: %w", key, s, s.classify(err))
	}
	return nil
}

// seekableBody gives the SDK a body it can hash and rewind for a retry: the reader itself when it can seek
// (a file, a bytes.Reader: no copy), else the size bytes read into memory. Callers with large objects pass a
// file.
func seekableBody(r io.Reader, size int64) (io.ReadSeeker, error) {
	if rs, ok := r.(io.ReadSeeker); ok {
		cur, err := rs.Seek(0, io.SeekCurrent)
		if err == nil {
			var end int64
			if end, err = rs.Seek(0, io.SeekEnd); err == nil {
				_, err = rs.Seek(cur, io.SeekStart)
			}
			if err == nil && end-cur >= size {
				return io.NewSectionReader(readerAtSeeker{rs}, cur, size), nil
			}
			if err == nil {
				return nil, fmt.Errorf("reader holds %d of %d bytes: %w", end-cur, size, io.ErrUnexpectedEOF)
			}
		}
	}
	buf := make([]byte, size)
	if n, err := io.ReadFull(r, buf); err != nil {
		return nil, fmt.Errorf("reader ended after %d of %d bytes: %w", n, size, io.ErrUnexpectedEOF)
	}
	return bytes.NewReader(buf), nil
}

// readerAtSeeker reads at an offset through Seek+Read, for a seeker that is not an io.ReaderAt. The SDK reads
// its body from one goroutine at a time.
type readerAtSeeker struct{ rs io.ReadSeeker }

func (r readerAtSeeker) ReadAt(p []byte, off int64) (int, error) {
	if ra, ok := r.rs.(io.ReaderAt); ok {
		return ra.ReadAt(p, off)
	}
	if _, err := r.rs.Seek(off, io.SeekStart); err != nil {
		return 0, err
	}
	return io.ReadFull(r.rs, p)
}

// Get streams the object.
func (s *S3) Get(ctx context.Context, key string) (io.ReadCloser, error) {
	if !ValidKey(key) {
		return nil, fmt.Errorf("blob: cannot get %q in %s: %w", key, s, ErrInvalidKey)
	}
	out, err := s.client.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(s.bucket), Key: aws.String(key)})
	if err != nil {
		return nil, fmt.Errorf("blob: cannot get %s in %s: %w", key, s, s.classify(err))
	}
	return out.Body, nil
}

// GetRange reads [off, off+n) with a ranged GET and checks the service returned exactly that.
func (s *S3) GetRange(ctx context.Context, key string, off, n int64) ([]byte, error) {
	if !ValidKey(key) {
		return nil, fmt.Errorf("blob: cannot read %q in %s: %w", key, s, ErrInvalidKey)
	}
	if off < 0 || n < 0 {
		return nil, fmt.Errorf("blob: cannot read %s [%d,+%d) in %s: %w", key, off, n, s, ErrInvalidRange)
	}
	if n == 0 {
		// HTTP has no empty range: check the object exists and is long enough.
		out, err := s.client.HeadObject(ctx, &s3.HeadObjectInput{Bucket: aws.String(s.bucket), Key: aws.String(key)})
		if err != nil {
			return nil, fmt.Errorf("blob: cannot read %s in %s: %w", key, s, s.classify(err))
		}
		if size := aws.ToInt64(out.ContentLength); off > size {
			return nil, fmt.Errorf("blob: cannot read %s [%d,+0) of %d bytes in %s: %w", key, off, size, s, ErrInvalidRange)
		}
		return []byte{}, nil
	}
	rng := "bytes=" + strconv.FormatInt(off, 10) + "-" + strconv.FormatInt(off+n-1, 10)
	out, err := s.client.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(s.bucket), Key: aws.String(key), Range: aws.String(rng)})
	if err != nil {
		return nil, fmt.Errorf("blob: cannot read %s [%d,+%d) in %s: %w", key, off, n, s, s.classify(err))
	}
	defer out.Body.Close()
	// A range running past the end is answered with the bytes that exist: read one more to see it.
	buf, err := io.ReadAll(io.LimitReader(out.Body, n+1))
	if err != nil {
		return nil, fmt.Errorf("blob: cannot read %s [%d,+%d) in %s: %w", key, off, n, s, err)
	}
	if int64(len(buf)) != n {
		return nil, fmt.Errorf("blob: cannot read %s [%d,+%d) in %s: got %d bytes: %w", key, off, n, s, len(buf), ErrInvalidRange)
	}
	return buf, nil
}

// List pages through ListObjectsV2, which returns keys in UTF-8 binary order: key order for valid keys.
// Objects whose key is not a valid key (written by something else) are skipped.
func (s *S3) List(ctx context.Context, prefix string, fn func(Object) error) error {
	if !ValidPrefix(prefix) {
		return fmt.Errorf("blob: cannot list %q in %s: %w", prefix, s, ErrInvalidKey)
	}
	in := &s3.ListObjectsV2Input{Bucket: aws.String(s.bucket)}
	if prefix != "" {
		in.Prefix = aws.String(prefix)
	}
	p := s3.NewListObjectsV2Paginator(s.client, in)
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			return fmt.Errorf("blob: cannot list %s in %s: %w", prefix, s, s.classify(err))
		}
		for _, o := range page.Contents {
			k := aws.ToString(o.Key)
			if !ValidKey(k) {
				continue
			}
			if err := fn(Object{Key: k, Size: aws.ToInt64(o.Size)}); err != nil {
				return err
			}
		}
	}
	return nil
}

// Delete removes the object; S3 answers a delete of a missing key with success.
func (s *S3) Delete(ctx context.Context, key string) error {
	if !ValidKey(key) {
		return fmt.Errorf("blob: cannot delete %q in %s: %w", key, s, ErrInvalidKey)
	}
	_, err := s.client.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: aws.String(s.bucket), Key: aws.String(key)})
	if err != nil {
		if errors.Is(s.classify(err), ErrNotFound) {
			return nil
		}
		return fmt.Errorf("blob: cannot delete %s in %s: %w", key, s, s.classify(err))
	}
	return nil
}

// deleteBatch is the most keys one DeleteObjects call takes (the S3 API's limit).
const deleteBatch = 1000

// DeletePrefix lists the keys under prefix and removes them with DeleteObjects, a thousand a call; a key the
// service reports it could not delete fails the call (a repeated call lists what is left).
func (s *S3) DeletePrefix(ctx context.Context, prefix string) (int, error) {
	if !ValidDeletePrefix(prefix) {
		return 0, fmt.Errorf("blob: cannot delete under %q in %s: %w", prefix, s, ErrInvalidKey)
	}
	var keys []string
	if err := s.List(ctx, prefix, func(o Object) error {
		keys = append(keys, o.Key)
		return nil
	}); err != nil {
		return 0, err
	}
	n := 0
	for len(keys) > 0 {
		part := keys[:min(len(keys), deleteBatch)]
		keys = keys[len(part):]
		objs := make([]types.ObjectIdentifier, len(part))
		for i, k := range part {
			objs[i] = types.ObjectIdentifier{Key: aws.String(k)}
		}
		out, err := s.client.DeleteObjects(ctx, &s3.DeleteObjectsInput{Bucket: aws.String(s.bucket),
			Delete: &types.Delete{Objects: objs, Quiet: aws.Bool(true)}})
		if err != nil {
			return n, fmt.Errorf("blob: cannot delete under %s in %s: %w", prefix, s, s.classify(err))
		}
		if len(out.Errors) > 0 {
			e := out.Errors[0]
			return n + len(part) - len(out.Errors), fmt.Errorf("blob: cannot delete %s in %s: %s %s (%d keys refused)",
				aws.ToString(e.Key), s, aws.ToString(e.Code), aws.ToString(e.Message), len(out.Errors))
		}
		n += len(part)
	}
	return n, nil
}

// classify adds ErrNotFound, ErrForbidden or ErrInvalidRange to the service's answer where it means that. A missing bucket
// is also a 404, but a configuration error, not a missing object.
func (s *S3) classify(err error) error {
	var apiErr smithy.APIError
	if errors.As(err, &apiErr) && apiErr.ErrorCode() == "NoSuchBucket" {
		return err
	}
	var re *awshttp.ResponseError
	if errors.As(err, &re) {
		switch re.HTTPStatusCode() {
		case http.StatusNotFound:
			return fmt.Errorf("%w: %w", ErrNotFound, err)
		case http.StatusForbidden:
			return fmt.Errorf("%w: %w", ErrForbidden, err)
		case http.StatusRequestedRangeNotSatisfiable:
			return fmt.Errorf("%w: %w", ErrInvalidRange, err)
		}
	}
	return err
}
