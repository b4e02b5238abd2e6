package master

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/hashicorp/raft"

	"jobmaster/fsm"
	"jobmaster/transport"
)

// leaderHandler serves a request on the leader. It returns a retryable
// error (see retryable) only when it wrote nothing: leadership was lost
// under it and the request goes to the next leader.
type leaderHandler func(w http.ResponseWriter, r *http.Request, body []byte, s *session) error

const (
	hopsHeader  = "X-Jobmaster-Hops"
	jobIDHeader = "X-Jobmaster-Job-Id"
	maxHops     = 3
)

// retryable reports whether an error means "not the leader any more": the
// request is safe to hand to the next leader because every write is
// idempotent (jobs are submitted under an id, cancels and reports repeat).
func retryable(err error) bool {
	return errors.Is(err, raft.ErrNotLeader) || errors.Is(err, raft.ErrLeadershipLost) ||
		errors.Is(err, fsm.ErrStaleToken) || errors.Is(err, context.Canceled) ||
		errors.Is(err, raft.ErrRaftShutdown) || errors.Is(err, errShutdown) ||
		// An operator restore replaced the state while the write was
		// being committed: it was not applied, and goes to the session
		// that starts after the restore.
		errors.Is(err, raft.ErrAbortedByRestore) ||
		// Some of a batch's submissions were committed: decided again,
		// they are found to exist.
		errors.Is(err, errPartlyDecided) ||
		// The leader's disk failed it: nothing was written, and it
		// stepped down.
		errors.Is(err, errLogStore) ||
		// Raft's queue stayed full: the entry was not taken.
		errors.Is(err, raft.ErrEnqueueTimeout) ||
		// Leadership is being handed over: the next leader takes it.
		errors.Is(err, raft.ErrLeadershipTransferInProgress)
}

// leaderWrite serves a request on the leader: here if this master leads,
// else forwarded; during an election it waits up to RequestWait and then
// answers 503 with Retry-After.
func (m *Master) leaderWrite(h leaderHandler) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		body, ok := readBody(w, r)
		if !ok {
			return
		}
		m.onLeader(w, r, body, h)
	}
}

// staleRead reports whether r asks to be answered from this master's own
// state: ?stale (queryFlag; ?stale=false asks for the default, a
// consistent read, as a reader of it would expect).
func staleRead(r *http.Request) bool { return queryFlag(r, "stale") }

// queryFlag reports whether r's query sets the flag name: present, with no
// value or any but false and 0.
func queryFlag(r *http.Request, name string) bool {
	q := r.URL.Query()
	if !q.Has(name) {
		return false
	}
	switch strings.ToLower(q.Get(name)) {
	case "false", "0":
		return false
	}
	return true
}

// leaderRead is leaderWrite for reads, except that ?stale serves the
// request from this master's own state, with no leader needed. A default
// read is consistent: the leader first commits a fence (proposer.Fence),
// which confirms with a quorum that it still leads (a deposed leader,
// paused while another took over, would otherwise answer from a state that
// lacks acknowledged writes).
func (m *Master) leaderRead(h leaderHandler) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if staleRead(r) {
			_ = h(w, r, nil, nil)
			return
		}
		body, ok := readBody(w, r)
		if !ok {
			return
		}
		m.onLeader(w, r, body, func(w http.ResponseWriter, r *http.Request, body []byte, s *session) error {
			if err := m.prop.Fence(r.Context()); err != nil {
				return err
			}
			if !s.current() {
				return fsm.ErrStaleToken // a newer epoch: wait for this term's session
			}
			return h(w, r, body, s)
		})
	}
}

// onLeader serves a request with h on the leader: here when this master
// leads, else forwarded over HTTP (forward).
func (m *Master) onLeader(w http.ResponseWriter, r *http.Request, body []byte, h leaderHandler) {
	hops, _ := strconv.Atoi(r.Header.Get(hopsHeader))
	m.leaderDo(w, r, func(w http.ResponseWriter, r *http.Request, s *session) error {
		r, ok := m.confirmCaller(w, r)
		if !ok {
			return nil
		}
		return h(w, r, body, s)
	}, func(addr string) delivery {
		if hops >= maxHops {
			return notSent
		}
		return m.forward(w, r, body, addr, hops+1)
	})
}

// leaderDo serves a request on the leader: with here when this master
// leads with an established session, else with toLeader(the leader's HTTP
// address), which answers the request and returns answered, or returns
// what became of it having written nothing (notSent, leaderBusy, or
// noAnswer: the leader may have died, or be too busy to answer). Until
// one of them answers, it waits for a leader: for the next change of the
// session or of Raft's leader, at most 50 ms at a time, and RequestWait in
// all, then answers 503 with Retry-After. here's error means the same as a
// leaderHandler's.
func (m *Master) leaderDo(w http.ResponseWriter, r *http.Request, here func(http.ResponseWriter, *http.Request, *session) error,
	toLeader func(addr string) delivery) {
	deadline := m.cfg.Now().Add(m.cfg.RequestWait)
	unanswered := "" // a leader the request may have reached, which did not answer
	busy := ""       // a leader too many requests wait for
	for {
		s, changed := m.sessionWatch()
		if s != nil {
			err := here(w, r, s)
			if err == nil {
				return
			}
			if !retryable(err) {
				writeError(w, http.StatusInternalServerError, err.Error())
				return
			}
		} else if addr := m.leaderHTTPAddr(); addr != "" {
			switch toLeader(addr) {
			case answered:
				return
			case noAnswer:
				unanswered, busy = addr, ""
			case leaderBusy:
				busy = addr
			default:
				busy = ""
			}
		}
		if m.cfg.Now().After(deadline) {
			w.Header().Set("Retry-After", "1")
			writeError(w, http.StatusServiceUnavailable, noLeaderMessage(r, unanswered, busy))
			return
		}
		select {
		case <-changed:
		case <-time.After(50 * time.Millisecond):
		case <-r.Context().Done():
			return
		case <-m.stop:
			w.Header().Set("Retry-After", "1")
			writeError(w, http.StatusServiceUnavailable, "master is shutting down")
			return
		}
	}
}

// noLeaderMessage is the 503 of a request no leader answered in time.
// One that was sent to a leader, which did not answer (busy, or gone), is
// told that a write may have been carried out, and under which job id a
// POST /v1/jobs was; one held back because too many wait for the leader
// (busy) is told so.
func noLeaderMessage(r *http.Request, unanswered, busy string) string {
	switch {
	case unanswered == "" && busy != "":
		return fmt.Sprintf("the leader (%s) is busy: too many requests wait for it; retry shortly", busy)
	case unanswered == "":
		return "no leader available (an election may be in progress); retry shortly"
	}
	msg := fmt.Sprintf("the leader (%s) did not answer in time: it may be busy, or gone", unanswered)
	if r.Method == http.MethodGet || r.Method == http.MethodHead {
		return msg + "; retry shortly"
	}
	msg += "; the request may have been carried out"
	if id := r.Header.Get(jobIDHeader); id != "" {
		msg += fmt.Sprintf(", as job %s (look for it with GET /v1/jobs/%s before submitting again)", id, url.PathEscape(id))
	}
	return msg + "; retry shortly"
}

// leaderHTTPAddr is the HTTP address of the current leader if it is another
// master, else "".
func (m *Master) leaderHTTPAddr() string {
	_, id := m.raft.LeaderWithID()
	if id == "" || string(id) == m.cfg.NodeID {
		return ""
	}
	mem, ok := m.gossip.Get(string(id))
	if !ok {
		return ""
	}
	return mem.Meta.HTTPAddr
}

// delivery is what became of a request sent on to the leader.
type delivery int

const (
	answered   delivery = iota // its answer was written
	notSent                    // it did not leave, or was refused before it arrived
	leaderBusy                 // not sent: too many wait for the leader already
	noAnswer                   // it may have arrived, and no answer came
)

// deliveryOf is what a failed send's error says of the request: a
// connection refused never carried it.
func deliveryOf(err error) delivery {
	if errors.Is(err, syscall.ECONNREFUSED) {
		return notSent
	}
	return noAnswer
}

// forward relays a request to the leader and its answer back. It returns
// notSent or noAnswer when no answer came (the leader may have died):
// the caller waits for the next leader and tries again.
func (m *Master) forward(w http.ResponseWriter, r *http.Request, body []byte, addr string, hops int) delivery {
	ctx, cancel := context.WithTimeout(r.Context(), m.cfg.RequestWait+5*time.Second)
	defer cancel()
	u, err := transport.PeerURL(m.client, addr, r.URL.RequestURI())
	if err != nil {
		m.log.Debug("not forwarding to the leader", "leader", addr, "err", err)
		return notSent
	}
	req, err := http.NewRequestWithContext(ctx, r.Method, u, bytes.NewReader(body))
	if err != nil {
		return notSent
	}
	copyHeaders(req, r, jobIDHeader)
	req.Header.Set(hopsHeader, strconv.Itoa(hops))
	resp, err := m.client.Do(req)
	if err != nil {
		m.log.Debug("forward to leader failed", "leader", addr, "err", err)
		return deliveryOf(err)
	}
	defer resp.Body.Close()
	if !relayAnswer(w, resp, transport.MaxResponseBytes) {
		return noAnswer
	}
	return answered
}

// relayedHeaders are the headers of a request that a master relays to the
// leader: its body's type and its token.
var relayedHeaders = []string{"Content-Type", tokenHeader, authHeader}

// copyHeaders copies to the request req the headers of r that a forward
// carries: relayedHeaders and extra.
func copyHeaders(req, r *http.Request, extra ...string) {
	for _, h := range slices.Concat(relayedHeaders, extra) {
		if v := r.Header.Get(h); v != "" {
			req.Header.Set(h, v)
		}
	}
}

// relayAnswer copies a forwarded request's answer to w. It reads the answer
// whole before relaying it, so that one cut short is not relayed and the
// request is retried (it returns false, having written nothing). An answer
// longer than buffer bytes (a snapshot of a large state) is streamed on
// after that many: a failure past that point cuts it short.
func relayAnswer(w http.ResponseWriter, resp *http.Response, buffer int64) bool {
	data, err := io.ReadAll(io.LimitReader(resp.Body, buffer))
	if err != nil {
		return false
	}
	for k, v := range resp.Header {
		switch k {
		case "Content-Length", "Connection", "Transfer-Encoding", "Date", "Keep-Alive":
		default:
			w.Header()[k] = v
		}
	}
	w.WriteHeader(resp.StatusCode)
	_, _ = w.Write(data)
	if int64(len(data)) == buffer {
		_, _ = io.Copy(w, resp.Body)
	}
	return true
}
