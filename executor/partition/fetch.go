package partition

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"jobmaster/pki"
	"jobmaster/transport"
	"jobmaster/wire"
)

// DefaultHeaderTimeout bounds the wait for a fetch's answer to begin; the
// bytes that follow may take as long as their producer.
const DefaultHeaderTimeout = 10 * time.Second

// maxErrorBody bounds what is read of an error answer.
const maxErrorBody = 4 << 10

// ErrProducerFailed is the error of a fetch whose stream ended with
// EndFailed: the producer ended without FINISHED, so the bytes are not its
// output.
var ErrProducerFailed = errors.New("its producer ended without finishing")

// BrokenStreamError is the error of a fetch whose producer broke the
// stream (EndFailed with wire.HeaderEndWhy): Why is how (wire.EndShrank,
// wire.EndReplaced, or what a newer holder sent, cut). It is an
// ErrProducerFailed.
type BrokenStreamError struct{ Why string }

func (e *BrokenStreamError) Error() string {
	switch e.Why {
	case wire.EndShrank:
		return "its producer cut short a file it was streaming: a pipelined output must only be appended to"
	case wire.EndReplaced:
		return "its producer replaced a file it was streaming: a pipelined output must only be appended to, never replaced or renamed over"
	}
	return "its producer broke the stream (" + e.Why + ")"
}

func (e *BrokenStreamError) Unwrap() error { return ErrProducerFailed }

// maxWhy bounds what of a holder's HeaderEndWhy is kept: printable ASCII.
const maxWhy = 32

func cleanWhy(s string) string {
	var b strings.Builder
	for _, r := range s {
		if b.Len() == maxWhy {
			break
		}
		if r >= 0x20 && r < 0x7f {
			b.WriteRune(r)
		}
	}
	return b.String()
}

// UnavailableError is the error of a fetch that gave up on its source:
// after failing for the whole bound, or at once for an answer that no retry
// can change (a 400 or 416).
type UnavailableError struct {
	// Err is the last attempt's error.
	Err error
}

func (e *UnavailableError) Error() string { return e.Err.Error() }
func (e *UnavailableError) Unwrap() error { return e.Err }

// SinkError is the error of a fetch that could not store what it
// received: the failure is local (the disk is full, say), not the source's.
type SinkError struct{ Err error }

func (e *SinkError) Error() string { return "storing the input: " + e.Err.Error() }
func (e *SinkError) Unwrap() error { return e.Err }

// Source is what one fetch reads: the bytes that subtask Index of vertex
// Consumer reads from producer execution Producer, held by executor
// Executor at Addr (a bare host:port, transport.PeerURL).
type Source struct {
	Addr string
	// Executor is the id of the executor that holds the bytes: with TLS,
	// only an answer from its certificate is read.
	Executor string
	Producer string
	Consumer string
	Index    int
	// Follow streams a running producer's (pipelined) output until it ends.
	Follow bool
}

// Fetcher fetches partitions from the executors that hold them.
type Fetcher struct {
	Client *http.Client
	// Fence returns the fetching executor's newest fence, sent with every
	// attempt.
	Fence func() (cluster string, token uint64)
	// Bound is how long a source may go on failing before the fetch gives
	// up on it (see Retry); zero is DefaultTimeout.
	Bound time.Duration
	// HeaderTimeout bounds the wait for an answer; zero is
	// DefaultHeaderTimeout.
	HeaderTimeout time.Duration
	// Now is the clock the bound is measured on (default time.Now).
	Now func() time.Time
	// Log, if set, gets every failed attempt (debug) and every source given
	// up (warn).
	Log *slog.Logger
	// Observe, if set, is told after every attempt how many bytes it
	// brought and whether it failed (ended without its end marker).
	Observe func(bytes int64, failed bool)
}

// Fetch copies what src holds into w, resuming at the offset it reached
// whenever an attempt breaks off, so w gets every byte once. It returns nil
// once the stream ended with EndComplete; ErrProducerFailed if it ended with
// EndFailed; a *SinkError if w failed; an *UnavailableError if it gave up
// on src; ctx's error if ctx ended first. An attempt that brings bytes is
// followed by the next one at once; one that brings none is a failure,
// retried on the schedule of Retry.
func (f *Fetcher) Fetch(ctx context.Context, src Source, w io.Writer) error {
	now := f.Now
	if now == nil {
		now = time.Now
	}
	bound := f.Bound
	if bound <= 0 {
		bound = DefaultTimeout
	}
	var off int64
	var first time.Time
	failures := 0
	for {
		n, end, why, err := f.attempt(ctx, src, off, w)
		off += n
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if f.Observe != nil {
			f.Observe(n, end == "")
		}
		var sink *SinkError
		var perm *UnavailableError
		switch {
		case errors.As(err, &sink):
			return err
		case errors.As(err, &perm):
			return err
		case end == wire.EndComplete:
			return nil
		case end == wire.EndFailed && why != "":
			return &BrokenStreamError{Why: cleanWhy(why)}
		case end == wire.EndFailed:
			return ErrProducerFailed
		case n > 0:
			failures, first = 0, time.Time{}
			continue
		}
		if err == nil {
			err = errors.New("the answer ended without its end marker")
		}
		failures++
		t := now()
		if first.IsZero() {
			first = t
		}
		wait, giveUp := Retry(first, t, failures, bound)
		if giveUp {
			if f.Log != nil {
				f.Log.Warn("giving up on an input", "execution", src.Producer, "addr", src.Addr, "failing_for", t.Sub(first), "err", err)
			}
			return &UnavailableError{Err: fmt.Errorf("%w (failing for %s)", err, t.Sub(first).Round(time.Millisecond))}
		}
		if f.Log != nil {
			f.Log.Debug("fetch failed; retrying", "execution", src.Producer, "addr", src.Addr, "offset", off, "retry_in", wait, "err", err)
		}
		timer := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			timer.Stop()
			return ctx.Err()
		case <-timer.C:
		}
	}
}

// Query is the query of a fetch of src from offset.
func Query(src Source, offset int64) url.Values {
	q := url.Values{
		"id":       {src.Producer},
		"consumer": {src.Consumer},
		"index":    {strconv.Itoa(src.Index)},
		"offset":   {strconv.FormatInt(offset, 10)},
	}
	if src.Follow {
		q.Set("follow", "1")
	}
	return q
}

// attempt is one request: it returns how many bytes it copied, the end
// marker (and why, for a broken stream) if the answer was read to its end,
// and the error that stopped it.
func (f *Fetcher) attempt(ctx context.Context, src Source, off int64, w io.Writer) (int64, string, string, error) {
	actx, cancel := context.WithCancel(ctx)
	defer cancel()
	u, err := transport.PeerURL(f.Client, src.Addr, wire.PathPartitionData+"?"+Query(src, off).Encode())
	if err != nil {
		return 0, "", "", &UnavailableError{Err: err}
	}
	req, err := http.NewRequestWithContext(actx, http.MethodGet, u, nil)
	if err != nil {
		return 0, "", "", &UnavailableError{Err: err}
	}
	cluster, token := f.Fence()
	if cluster != "" {
		req.Header.Set(wire.HeaderCluster, cluster)
	}
	req.Header.Set(wire.HeaderToken, strconv.FormatUint(token, 10))
	wait := f.HeaderTimeout
	if wait <= 0 {
		wait = DefaultHeaderTimeout
	}
	timer := time.AfterFunc(wait, cancel)
	resp, err := f.Client.Do(req)
	if !timer.Stop() && err != nil && ctx.Err() == nil {
		err = fmt.Errorf("no answer within %s", wait)
	}
	if err != nil {
		return 0, "", "", err
	}
	defer resp.Body.Close()
	if err := f.checkHolder(resp, src); err != nil {
		return 0, "", "", err
	}
	if resp.StatusCode != http.StatusOK {
		body, _ := io.ReadAll(io.LimitReader(resp.Body, maxErrorBody))
		serr := &transport.StatusError{Code: resp.StatusCode, Message: transport.ErrorMessage(body)}
		switch resp.StatusCode {
		case http.StatusBadRequest, http.StatusRequestedRangeNotSatisfiable, http.StatusGone:
			return 0, "", "", &UnavailableError{Err: serr}
		}
		return 0, "", "", serr
	}
	n, err := copyBody(w, resp.Body)
	if err != nil {
		return n, "", "", err
	}
	return n, resp.Trailer.Get(wire.HeaderEnd), resp.Trailer.Get(wire.HeaderEndWhy), nil
}

// checkHolder checks, when the fetch client speaks TLS, that the answer
// came over TLS from the certificate of the executor src names: the
// client admits only executors' certificates (transport.ExecutorOnly), but
// another executor answering at the address (gossip gave it the holder's)
// must not feed this task its bytes. Another answer is an error the fetch
// retries, since the address may yet be the holder's again.
func (f *Fetcher) checkHolder(resp *http.Response, src Source) error {
	if transport.Scheme(f.Client) != transport.SchemeHTTPS {
		return nil
	}
	if err := transport.AnswerFrom(resp, src.Addr, pki.Executor, src.Executor); err != nil {
		return fmt.Errorf("%w, which holds %s", err, src.Producer)
	}
	return nil
}

// copyBody copies body to w a chunk at a time; a failure of w is a
// *SinkError.
func copyBody(w io.Writer, body io.Reader) (int64, error) {
	bp := bufPool.Get().(*[]byte)
	defer bufPool.Put(bp)
	buf := *bp
	var n int64
	for {
		m, err := body.Read(buf)
		if m > 0 {
			k, werr := w.Write(buf[:m])
			n += int64(k)
			if werr == nil && k < m {
				werr = io.ErrShortWrite
			}
			if werr != nil {
				return n, &SinkError{Err: werr}
			}
		}
		if errors.Is(err, io.EOF) {
			return n, nil
		}
		if err != nil {
			return n, err
		}
	}
}
