package claimcheck

import (
	"archive/zip"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"

	"github.com/ankusa-go/ankusa/storage/blob"
)

// The pack format (invariant 2). A pack is a ZIP whose entries are all stored (method 0, no data descriptor,
// no extra fields), in this order:
//
//	index           16-byte header "ACLMIDX1" | count uint32 | 0 uint32, then count rows of 48 bytes:
//	                offset uint64 | length uint64 | sha256 [32] (big-endian; offset of the body's bytes in the pack)
//	claims/00000    the body at position 0, then one entry per position
//	manifest.json   {"version":1,"tenant":…,"pack_id":…,"created_at_ms":…,"claims":count}
//
// The index entry's local header starts the object, so its data is at a fixed offset.
const (
	indexName    = "index"
	indexMagic   = "ACLMIDX1"
	localHdrLen  = 30
	indexHdrLen  = 16
	indexRowLen  = 48
	indexDataOff = localHdrLen + len(indexName)
	// headLen is what a reader fetches first: the index entry's local header and the index header.
	headLen = indexDataOff + indexHdrLen
)

func bodyName(pos int) string { return fmt.Sprintf("claims/%05d", pos) }

type manifest struct {
	Version     int    `json:"version"`
	Tenant      string `json:"tenant"`
	PackID      string `json:"pack_id"`
	CreatedAtMS int64  `json:"created_at_ms"`
	Claims      int    `json:"claims"`
}

// encodePack builds the pack of bodies; sums are their SHA-256s.
func encodePack(tenant string, id ClaimID, bodies [][]byte, sums [][32]byte) ([]byte, error) {
	if len(bodies) == 0 || len(bodies) > MaxClaimsPerPack {
		return nil, fmt.Errorf("claimcheck: cannot pack %d bodies (1 to %d)", len(bodies), MaxClaimsPerPack)
	}
	index := make([]byte, indexHdrLen+indexRowLen*len(bodies))
	copy(index, indexMagic)
	binary.BigEndian.PutUint32(index[8:], uint32(len(bodies)))
	// Offsets follow from the fixed header sizes; checked against what the writer produced below.
	off := int64(indexDataOff + len(index))
	offsets := make([]int64, len(bodies))
	for i, b := range bodies {
		off += int64(localHdrLen + len(bodyName(i)))
		offsets[i] = off
		row := index[indexHdrLen+indexRowLen*i:]
		binary.BigEndian.PutUint64(row[0:], uint64(off))
		binary.BigEndian.PutUint64(row[8:], uint64(len(b)))
		copy(row[16:48], sums[i][:])
		off += int64(len(b))
	}
	mf, err := json.Marshal(manifest{Version: 1, Tenant: tenant, PackID: id.Pack().String(), CreatedAtMS: id.Time().UnixMilli(), Claims: len(bodies)})
	if err != nil {
		return nil, err
	}

	var buf bytes.Buffer
	buf.Grow(int(off) + 1024 + 100*len(bodies))
	zw := zip.NewWriter(&buf)
	put := func(name string, data []byte) error {
		w, err := zw.CreateRaw(&zip.FileHeader{
			Name:               name,
			Method:             zip.Store,
			CRC32:              crc32.ChecksumIEEE(data),
			CompressedSize64:   uint64(len(data)),
			UncompressedSize64: uint64(len(data)),
		})
		if err != nil {
			return err
		}
		_, err = w.Write(data)
		return err
	}
	if err := put(indexName, index); err != nil {
		return nil, fmt.Errorf("claimcheck: cannot write pack index: %w", err)
	}
	for i, b := range bodies {
		if err := zw.Flush(); err != nil {
			return nil, err
		}
		if want := offsets[i] - int64(localHdrLen+len(bodyName(i))); int64(buf.Len()) != want {
			return nil, fmt.Errorf("claimcheck: pack layout: entry %d at %d, want %d", i, buf.Len(), want)
		}
		if err := put(bodyName(i), b); err != nil {
			return nil, fmt.Errorf("claimcheck: cannot write pack entry: %w", err)
		}
	}
	if err := put("manifest.json", mf); err != nil {
		return nil, fmt.Errorf("claimcheck: cannot write pack manifest: %w", err)
	}
	if err := zw.Close(); err != nil {
		return nil, fmt.Errorf("claimcheck: cannot close pack: %w", err)
	}
	return buf.Bytes(), nil
}

// Info describes one claimed body.
type Info struct {
	Size   int64
	SHA256 [32]byte
}

// Reader finds claims in packs of a blob store. It is safe for concurrent use.
type Reader struct{ store blob.Store }

// NewReader reads packs from store (the claim blob store, unprefixed).
func NewReader(store blob.Store) *Reader { return &Reader{store: store} }

// Stat reads the claim's index row (two ranged reads).
func (r *Reader) Stat(ctx context.Context, tenant, id string) (Info, error) {
	info, _, _, err := r.locate(ctx, tenant, id)
	return info, err
}

// Fetch reads the claim's body (three ranged reads). The caller checks the digest if it needs to.
func (r *Reader) Fetch(ctx context.Context, tenant, id string) (Info, []byte, error) {
	info, key, off, err := r.locate(ctx, tenant, id)
	if err != nil {
		return Info{}, nil, err
	}
	body, err := r.store.GetRange(ctx, key, off, info.Size)
	if err != nil {
		return Info{}, nil, r.storeErr(key, err)
	}
	return info, body, nil
}

func (r *Reader) locate(ctx context.Context, tenant, idText string) (Info, string, int64, error) {
	id, err := parse(tenant, idText)
	if err != nil {
		return Info{}, "", 0, err
	}
	key := PackKey(tenant, id)
	head, err := r.store.GetRange(ctx, key, 0, int64(headLen))
	if err != nil {
		return Info{}, "", 0, r.storeErr(key, err)
	}
	count, err := parseHead(head)
	if err != nil {
		return Info{}, "", 0, fmt.Errorf("claimcheck: %s: %w", key, err)
	}
	pos := id.Position()
	if pos >= count {
		return Info{}, "", 0, fmt.Errorf("claimcheck: %s holds %d claims, not position %d: %w", key, count, pos, ErrNotFound)
	}
	row, err := r.store.GetRange(ctx, key, int64(headLen+indexRowLen*pos), indexRowLen)
	if err != nil {
		return Info{}, "", 0, r.storeErr(key, err)
	}
	off, n := int64(binary.BigEndian.Uint64(row[0:])), int64(binary.BigEndian.Uint64(row[8:]))
	if off < 0 || n < 0 {
		return Info{}, "", 0, fmt.Errorf("claimcheck: %s: index row %d out of range: %w", key, pos, ErrCorruptPack)
	}
	info := Info{Size: n}
	copy(info.SHA256[:], row[16:48])
	return info, key, off, nil
}

// parseHead checks the index entry's local header and the index header and returns the claim count.
func parseHead(h []byte) (int, error) {
	le := binary.LittleEndian
	if len(h) != headLen || le.Uint32(h[0:]) != 0x04034b50 || le.Uint16(h[8:]) != zip.Store ||
		int(le.Uint16(h[26:])) != len(indexName) || le.Uint16(h[28:]) != 0 ||
		string(h[localHdrLen:indexDataOff]) != indexName || string(h[indexDataOff:indexDataOff+8]) != indexMagic {
		return 0, ErrCorruptPack
	}
	count := int(binary.BigEndian.Uint32(h[indexDataOff+8:]))
	if count < 1 || count > MaxClaimsPerPack || int(le.Uint32(h[22:])) != indexHdrLen+indexRowLen*count {
		return 0, ErrCorruptPack
	}
	return count, nil
}

// storeErr maps a missing pack to ErrNotFound and a pack too short for its own header to ErrCorruptPack.
func (r *Reader) storeErr(key string, err error) error {
	switch {
	case errors.Is(err, blob.ErrNotFound):
		return fmt.Errorf("claimcheck: no pack %s: %w", key, ErrNotFound)
	case errors.Is(err, blob.ErrInvalidRange):
		return fmt.Errorf("claimcheck: %s: %w (%w)", key, ErrCorruptPack, err)
	}
	return err
}

// sums returns the SHA-256 of each body.
func sums(bodies [][]byte) [][32]byte {
	out := make([][32]byte, len(bodies))
	for i, b := range bodies {
		out[i] = sha256.Sum256(b)
	}
	return out
}
