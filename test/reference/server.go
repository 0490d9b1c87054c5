package reference

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"net"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/linxGnu/grocksdb"
	"github.com/valyala/fasthttp"
)

const (
	// maxBatch is the most requests one synced write carries.
	maxBatch = 1024
	// shutdownGrace bounds how long Close waits for requests in flight.
	shutdownGrace = 10 * time.Second
)

// Column family names, in the order they are opened.
var columnFamilies = []string{"default", "hooks", "deliveries"}

const (
	cfHooks      = 1
	cfDeliveries = 2
)

// Server is a running reference receiver. Its methods are safe for concurrent use.
type Server struct {
	db     *grocksdb.DB
	cfs    []*grocksdb.ColumnFamilyHandle
	opts   *grocksdb.Options
	wo     *grocksdb.WriteOptions
	ln     net.Listener
	http   *fasthttp.Server
	url    string
	nextSq uint64 // owned by the writer goroutine after Start
	// commit writes one batch synced; a field so a test can wrap it to stall or fail.
	commit func(*grocksdb.WriteBatch) error

	// in hands a request to the writer; unbuffered, so a request is either owned by
	// the writer (and will be answered) or was never taken (and gets a 503).
	in         chan *pending
	closing    chan struct{}
	serveDone  chan error
	writerDone chan struct{}
	pool       sync.Pool
	closeOnce  sync.Once
	closeErr   error
}

// pending is one request waiting for its batch; pooled, so a request allocates
// nothing of its own beyond the copy of its body when the pool is cold.
type pending struct {
	body []byte
	done chan error
}

// Start opens (or creates) a RocksDB database in dir and serves on 127.0.0.1:0.
func Start(dir string) (*Server, error) {
	return start(dir, nil)
}

// commitFunc writes one batch; start's wrap may decorate it to inject a fault.
type commitFunc = func(*grocksdb.WriteBatch) error

func start(dir string, wrap func(commitFunc) commitFunc) (*Server, error) {
	opts := grocksdb.NewDefaultOptions()
	opts.SetCreateIfMissing(true)
	opts.SetCreateIfMissingColumnFamilies(true)
	opts.SetParanoidChecks(true)
	opts.SetWALRecoveryMode(grocksdb.TolerateCorruptedTailRecordsRecovery)
	cfOpts := make([]*grocksdb.Options, len(columnFamilies))
	for i := range cfOpts {
		cfOpts[i] = opts
	}
	db, cfs, err := grocksdb.OpenDbColumnFamilies(opts, dir, columnFamilies, cfOpts)
	if err != nil {
		opts.Destroy()
		return nil, fmt.Errorf("reference: cannot open rocksdb at %s: %w", dir, err)
	}
	s := &Server{
		db:         db,
		cfs:        cfs,
		opts:       opts,
		wo:         grocksdb.NewDefaultWriteOptions(),
		in:         make(chan *pending),
		closing:    make(chan struct{}),
		serveDone:  make(chan error, 1),
		writerDone: make(chan struct{}),
	}
	s.wo.SetSync(true)
	s.commit = func(wb *grocksdb.WriteBatch) error { return s.db.Write(s.wo, wb) }
	if wrap != nil {
		s.commit = wrap(s.commit)
	}
	s.pool.New = func() any { return &pending{done: make(chan error, 1)} }
	s.nextSq = s.lastSeq() + 1

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		s.closeDB()
		return nil, fmt.Errorf("reference: cannot listen: %w", err)
	}
	s.ln = ln
	s.url = "http://" + ln.Addr().String() + "/webhooks/bench"
	s.http = &fasthttp.Server{
		Handler:       s.handle,
		Name:          "reference",
		NoDefaultDate: true,
		// fasthttp's idle-worker cleaner sleeps this long between rounds and only
		// notices Shutdown when it wakes; short, so Close leaves no goroutine behind.
		MaxIdleWorkerDuration: 100 * time.Millisecond,
	}
	go s.writeLoop()
	go func() { s.serveDone <- s.http.Serve(ln) }()
	return s, nil
}

// URL is where to POST hooks: "http://127.0.0.1:<port>/webhooks/bench".
func (s *Server) URL() string { return s.url }

// Close stops accepting, answers the requests in flight (201 if their batch was
// taken by the writer, 503 otherwise), and closes the database. Rows acknowledged
// before Close are on disk when it returns.
func (s *Server) Close() error {
	s.closeOnce.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), shutdownGrace)
		defer cancel()
		err := s.http.ShutdownWithContext(ctx)
		// Shutdown does nothing if Serve has not reached its listener yet; closing
		// the listener ourselves makes that Serve return at once.
		_ = s.ln.Close()
		<-s.serveDone // its error only says the listener was closed
		close(s.closing)
		<-s.writerDone
		s.closeDB()
		if err != nil {
			s.closeErr = fmt.Errorf("reference: cannot shut down: %w", err)
		}
	})
	return s.closeErr
}

func (s *Server) closeDB() {
	for _, cf := range s.cfs {
		cf.Destroy()
	}
	s.db.Close()
	if s.wo != nil {
		s.wo.Destroy()
	}
	s.opts.Destroy()
}

// Stored is how many hooks the server has stored since it started on an empty directory (the highest seq).
// It must not be called after Close.
func (s *Server) Stored() uint64 { return s.lastSeq() }

// lastSeq is the highest hook seq stored, so a reopened directory never reuses one.
func (s *Server) lastSeq() uint64 {
	ro := grocksdb.NewDefaultReadOptions()
	defer ro.Destroy()
	it := s.db.NewIteratorCF(ro, s.cfs[cfHooks])
	defer it.Close()
	it.SeekToLast()
	if !it.Valid() {
		return 0
	}
	k := it.Key()
	defer k.Free()
	if len(k.Data()) != 8 {
		return 0
	}
	return binary.BigEndian.Uint64(k.Data())
}

var (
	webhooksPrefix = []byte("/webhooks/")
	ackHead        = []byte(`{"status":"accepted","id":"`)
	ackTail        = []byte(`"}`)
	notFound       = []byte(`{"error":"not_found"}`)
	unavailable    = []byte(`{"error":"unavailable"}`)
)

func (s *Server) handle(ctx *fasthttp.RequestCtx) {
	ctx.SetContentType("application/json")
	if !ctx.IsPost() || !bytes.HasPrefix(ctx.Path(), webhooksPrefix) {
		ctx.SetStatusCode(fasthttp.StatusNotFound)
		ctx.SetBody(notFound)
		return
	}
	id, err := uuid.NewV7()
	if err != nil {
		s.refuse(ctx)
		return
	}
	p := s.pool.Get().(*pending)
	// fasthttp reuses the request buffer once the handler returns; the writer may
	// still hold the body then only if we copy it.
	p.body = append(p.body[:0], ctx.PostBody()...)
	select {
	case s.in <- p:
	case <-s.closing:
		s.pool.Put(p)
		s.refuse(ctx)
		return
	}
	err = <-p.done
	s.pool.Put(p)
	if err != nil {
		s.refuse(ctx)
		return
	}
	var text [36]byte
	encodeUUID(text[:], id)
	ctx.SetStatusCode(fasthttp.StatusCreated)
	ctx.Response.AppendBody(ackHead)
	ctx.Response.AppendBody(text[:])
	ctx.Response.AppendBody(ackTail)
}

func (s *Server) refuse(ctx *fasthttp.RequestCtx) {
	ctx.Response.Header.Set("Retry-After", "1")
	ctx.SetStatusCode(fasthttp.StatusServiceUnavailable)
	ctx.SetBody(unavailable)
}

// writeLoop is the only goroutine that writes: it takes every request waiting,
// commits them in one synced batch, and answers each.
func (s *Server) writeLoop() {
	defer close(s.writerDone)
	wb := grocksdb.NewWriteBatch()
	defer wb.Destroy()
	batch := make([]*pending, 0, maxBatch)
	var hookKey [8]byte
	var deliveryKey [10]byte // seq:64, sink:16 (sink 0)
	var row [5]byte          // state 1 = pending, body size:32
	row[0] = 1
	for {
		select {
		case p := <-s.in:
			batch = append(batch[:0], p)
		case <-s.closing:
			return
		}
	drain:
		for len(batch) < maxBatch {
			select {
			case p := <-s.in:
				batch = append(batch, p)
			default:
				break drain
			}
		}
		wb.Clear()
		for _, p := range batch {
			binary.BigEndian.PutUint64(hookKey[:], s.nextSq)
			copy(deliveryKey[:8], hookKey[:])
			binary.BigEndian.PutUint32(row[1:], uint32(len(p.body)))
			// PutCF copies key and value into the batch.
			wb.PutCF(s.cfs[cfHooks], hookKey[:], p.body)
			wb.PutCF(s.cfs[cfDeliveries], deliveryKey[:], row[:])
			s.nextSq++
		}
		err := s.commit(wb)
		if err != nil {
			err = fmt.Errorf("reference: cannot commit batch of %d: %w", len(batch), err)
		}
		for _, p := range batch {
			p.done <- err
		}
	}
}

// encodeUUID writes the canonical 36-character form of id into dst without the
// allocation uuid.UUID.String makes.
func encodeUUID(dst []byte, id uuid.UUID) {
	const hexDigits = "0123456789abcdef"
	j := 0
	for i, b := range id {
		if i == 4 || i == 6 || i == 8 || i == 10 {
			dst[j] = '-'
			j++
		}
		dst[j] = hexDigits[b>>4]
		dst[j+1] = hexDigits[b&0xf]
		j += 2
	}
}
