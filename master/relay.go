package master

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/hashicorp/go-msgpack/v2/codec"

	"jobmaster/jobspec"
	"jobmaster/transport"
)

// The relay carries the submissions a follower takes to the leader, many
// in one request: while a batch is on its way, the submissions that arrive
// wait, and the next batch takes them all (up to relayMaxItems and
// relayMaxBytes). A lone submission goes at once, in a batch of one. The
// leader decides a batch's submissions together (decideSubmissions: one
// Raft entry, or entries of at most maxEntryWeight subtasks) and answers
// each; the follower hands every client its own
// answer, exactly what the leader would have written to it.
//
// The batch travels as msgpack (the spec as parsed here, never JSON
// again) over the masters' kept-alive connections, under mutual TLS when
// TLS is on; only a master's certificate may send one. A batch that gets
// no answer is not answered here either: each of its submissions waits for
// the next leader and is relayed again (a submission is idempotent: its
// id was chosen before it left).

// relayPath is the leader's endpoint for relayed batches.
const relayPath = "/v1/internal/submit-batch"

const (
	// relayMaxItems and relayMaxBytes bound a batch: what the leader
	// reads of one (relayMaxBodyBytes) must hold the largest.
	relayMaxItems     = 512
	relayMaxBytes     = 4 << 20
	relayMaxBodyBytes = relayMaxBytes + 2<<20
	// relayInFlight is how many batches may be on their way to the leader
	// at once.
	relayInFlight = 2
	// relayMaxWaiting bounds the submissions waiting for a batch to one
	// leader; one more is not relayed (its request waits for the queue to
	// shrink, as it would for a leader).
	relayMaxWaiting = 16 * relayMaxItems
)

// errRelayUnknown is a leader's answer to a batch when it does not serve
// relayPath (an older version, during a rolling upgrade): the submission
// is forwarded as the request it came in.
var errRelayUnknown = errors.New("the leader does not take relayed batches")

// errRelayFull: too many submissions wait for the leader already.
var errRelayFull = errors.New("too many submissions wait for the leader")

// relayHandle encodes batches: msgpack, and no initial allocation larger
// than what the bytes at hand can fill.
var relayHandle = func() *codec.MsgpackHandle {
	h := &codec.MsgpackHandle{}
	h.RawToString = true
	h.MaxInitLen = 1024
	return h
}()

// relayBatch is a relayed request's body; relayAnswers the answer's, one
// answer per submission, in order.
type relayBatch struct {
	Submissions []submission `codec:"subs"`
}

type relayAnswers struct {
	Answers []answer `codec:"answers"`
}

// relay is a follower's side: the submissions waiting for the leader at
// each address, and the batches in flight there.
type relay struct {
	m       *Master
	mu      sync.Mutex
	leaders map[string]*relayQueue
}

type relayQueue struct {
	waiting  []*relayed
	inFlight int
}

// relayed is one submission on its way: its answer arrives on done (with
// err set when its batch got no answer). One whose ctx ended before its
// batch left is not sent: its request was answered already.
type relayed struct {
	ctx  context.Context
	sub  submission
	size int
	ans  answer
	err  error
	done chan struct{}
}

func newRelay(m *Master) *relay {
	return &relay{m: m, leaders: map[string]*relayQueue{}}
}

// submit relays sub to the leader at addr and returns the leader's answer,
// or an error when its batch got none (errRelayUnknown: the leader takes
// no batches). It waits at most RequestWait: a leader that accepts
// connections but does not answer holds no request longer than an
// election would.
func (rl *relay) submit(ctx context.Context, addr string, sub submission) (answer, error) {
	ctx, cancel := context.WithTimeout(ctx, rl.m.cfg.RequestWait)
	defer cancel()
	it := &relayed{ctx: ctx, sub: sub, size: specSize(sub), done: make(chan struct{})}
	rl.mu.Lock()
	q := rl.leaders[addr]
	if q == nil {
		q = &relayQueue{}
		rl.leaders[addr] = q
	}
	if len(q.waiting) >= relayMaxWaiting {
		q.waiting = slices.DeleteFunc(q.waiting, func(it *relayed) bool { return it.ctx.Err() != nil })
	}
	if len(q.waiting) >= relayMaxWaiting { // a sender is on its way: the queue stays
		rl.mu.Unlock()
		return answer{}, errRelayFull
	}
	q.waiting = append(q.waiting, it)
	if q.inFlight < relayInFlight {
		q.inFlight++
		go rl.send(addr, q)
	}
	rl.mu.Unlock()
	select {
	case <-it.done:
		return it.ans, it.err
	case <-ctx.Done():
		return answer{}, ctx.Err()
	case <-rl.m.stop:
		return answer{}, errShutdown
	}
}

// send sends batches to addr until none waits there.
func (rl *relay) send(addr string, q *relayQueue) {
	for {
		rl.mu.Lock()
		if len(q.waiting) == 0 {
			q.inFlight--
			if q.inFlight == 0 {
				delete(rl.leaders, addr)
			}
			rl.mu.Unlock()
			return
		}
		var batch []*relayed
		size, taken := 0, 0
		for _, it := range q.waiting {
			if len(batch) == relayMaxItems || (len(batch) > 0 && size+it.size > relayMaxBytes) {
				break
			}
			taken++
			if it.ctx.Err() != nil {
				continue // answered already: not sent
			}
			size += it.size
			batch = append(batch, it)
		}
		q.waiting = q.waiting[taken:]
		rl.mu.Unlock()
		if len(batch) == 0 {
			continue
		}

		answers, err := rl.post(addr, batch)
		for i, it := range batch {
			if err == nil {
				it.ans = answers[i]
			} else {
				it.err = err
			}
			close(it.done)
		}
		rl.m.metrics.relayed(len(batch), err != nil)
	}
}

// post sends one batch and returns its answers.
func (rl *relay) post(addr string, batch []*relayed) ([]answer, error) {
	m := rl.m
	body := relayBatch{Submissions: make([]submission, len(batch))}
	for i, it := range batch {
		body.Submissions[i] = it.sub
	}
	var data []byte
	if err := codec.NewEncoderBytes(&data, relayHandle).Encode(&body); err != nil {
		return nil, fmt.Errorf("encode batch: %w", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), m.cfg.RequestWait+5*time.Second)
	defer cancel()
	go func() { // a master that stops does not wait for its relays
		select {
		case <-m.stop:
			cancel()
		case <-ctx.Done():
		}
	}()
	u, err := transport.PeerURL(m.client, addr, relayPath)
	if err != nil {
		return nil, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u, bytes.NewReader(data))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", transport.BinaryType)
	resp, err := m.client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	out, err := io.ReadAll(io.LimitReader(resp.Body, transport.MaxResponseBytes+1))
	if err != nil {
		return nil, err
	}
	switch resp.StatusCode {
	case http.StatusOK:
	case http.StatusNotFound, http.StatusMethodNotAllowed, http.StatusUnsupportedMediaType:
		return nil, errRelayUnknown
	case http.StatusServiceUnavailable: // not the leader (any more): relayed again
		return nil, &transport.StatusError{Code: resp.StatusCode, Message: transport.ErrorMessage(out)}
	default:
		// Refused whole: no submission in it is retried, each is answered
		// with the leader's reason.
		a := errorAnswer(http.StatusBadGateway, fmt.Sprintf("the leader refused the relayed submission: %d %s",
			resp.StatusCode, transport.ErrorMessage(out)))
		answers := make([]answer, len(batch))
		for i := range answers {
			answers[i] = a
		}
		return answers, nil
	}
	var ans relayAnswers
	if err := codec.NewDecoderBytes(out, relayHandle).Decode(&ans); err != nil {
		return nil, fmt.Errorf("decode answers: %w", err)
	}
	if len(ans.Answers) != len(batch) {
		return nil, fmt.Errorf("%d answers to %d submissions", len(ans.Answers), len(batch))
	}
	return ans.Answers, nil
}

// specSize estimates what a submission adds to a batch: its command and
// env strings, which are nearly all of it.
func specSize(sub submission) int {
	n := 64 + len(sub.ID) + len(sub.Secret)
	if sub.Spec == nil {
		return n
	}
	for _, v := range sub.Spec.Vertices {
		n += 64 + len(v.ID)
		for _, a := range v.Command {
			n += len(a) + 4
		}
		for k, x := range v.Env {
			n += len(k) + len(x) + 8
		}
		for _, in := range v.Inputs {
			n += len(in.From) + 32
		}
	}
	return n
}

// submitBatch serves relayPath on the leader: it decides every submission
// of the batch and answers each. A master that does not lead answers 503,
// and the follower relays them again once it knows the leader.
func (m *Master) submitBatch(w http.ResponseWriter, r *http.Request) {
	data, err := transport.ReadBody(w, r, relayMaxBodyBytes)
	if err != nil {
		jsonFormat.Reject(w, err)
		return
	}
	batch, err := decodeBatch(data)
	if err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	// A submission that fails the checks is refused alone; the others are
	// decided.
	answers := make([]answer, len(batch.Submissions))
	var valid []submission
	var at []int
	for i, sub := range batch.Submissions {
		if err := checkRelayed(sub); err != nil {
			answers[i] = errorAnswer(http.StatusBadRequest, err.Error())
			continue
		}
		valid = append(valid, sub)
		at = append(at, i)
	}
	s := m.currentSession()
	if s != nil && len(valid) > 0 {
		var decided []answer
		decided, err = m.decideSubmissions(r.Context(), s, valid, nil)
		for k, i := range at {
			if err == nil {
				answers[i] = decided[k]
			}
		}
	}
	switch {
	case s == nil:
		w.Header().Set("Retry-After", "1")
		writeError(w, http.StatusServiceUnavailable, "not the leader")
		return
	case retryable(err):
		w.Header().Set("Retry-After", "1")
		writeError(w, http.StatusServiceUnavailable, "decide the batch again: "+err.Error())
		return
	case err != nil:
		writeError(w, http.StatusInternalServerError, err.Error())
		return
	}
	var out []byte
	if err := codec.NewEncoderBytes(&out, relayHandle).Encode(&relayAnswers{Answers: answers}); err != nil {
		writeError(w, http.StatusInternalServerError, "encode answers: "+err.Error())
		return
	}
	w.Header().Set("Content-Type", transport.BinaryType)
	_, _ = w.Write(out)
}

// decodeBatch decodes a relayed batch's body, once scanBatch has found
// nothing in it that would make more than a few times its size: an error
// names the bound the batch passes, or says it is malformed.
func decodeBatch(data []byte) (relayBatch, error) {
	var batch relayBatch
	if err := scanBatch(data); err != nil {
		if bound := (*errBatchBound)(nil); errors.As(err, &bound) {
			return batch, err
		}
		return batch, fmt.Errorf("malformed batch: %w", err)
	}
	if err := codec.NewDecoderBytes(data, relayHandle).Decode(&batch); err != nil {
		return batch, fmt.Errorf("malformed batch: %w", err)
	}
	if n := len(batch.Submissions); n == 0 || n > relayMaxItems {
		return batch, fmt.Errorf("a batch holds 1 to %d submissions, not %d", relayMaxItems, n)
	}
	return batch, nil
}

// checkRelayed checks a relayed submission as the master that took it did,
// for a batch from anyone who can reach this endpoint (without TLS, not
// only masters): a job id, and a spec that passes every check of a parsed
// one.
func checkRelayed(sub submission) error {
	if err := jobspec.CheckID(sub.ID); err != nil {
		return fmt.Errorf("job id: %w", err)
	}
	if sub.Spec == nil {
		return errors.New("no spec")
	}
	return jobspec.Check(sub.Spec)
}
