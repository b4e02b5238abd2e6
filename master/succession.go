package master

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/hashicorp/raft"

	"jobmaster/succession"
	"jobmaster/transport"
)

// The fast way through a leader's crash (package succession): a follower
// whose leader falls silent probes the leader's Raft address; when the
// connection is refused (the process is gone), it asks the other
// survivors for their log positions, and the survivor whose log is ahead
// stands for election at once, as the target of a leadership transfer
// would. Silence without a refusal (a paused or cut-off leader) is left to
// Raft's timeouts.

// raftPositionPath is the internal endpoint a survivor asks for another's
// log position; ?gone=ID tells the master asked that ID's process is gone,
// so that it probes at once rather than when it next finds the leader
// silent.
const raftPositionPath = "/v1/internal/raft-position"

// positionAnswer is a master's answer on raftPositionPath.
type positionAnswer struct {
	ID string `json:"id"`
	// Term and Index are those of the master's last log entry.
	Term  uint64 `json:"term"`
	Index uint64 `json:"index"`
	// Reaches: asked with ?gone=ID while ID led it, the master connected
	// to ID's Raft port just now.
	Reaches bool `json:"reaches,omitempty"`
	// HoldsVotes: the master does not vote yet (its log was empty and no
	// leader has brought it up to date: raftguard). A staged master is
	// made a voter only once it votes (staging.go).
	HoldsVotes bool `json:"holds_votes,omitempty"`
}

const (
	// probeTimeout bounds a probe's connect: a refusal comes at once, and
	// anything slower is not one.
	probeTimeout = 100 * time.Millisecond
	// positionTimeout bounds the wait for a survivor's position: one that
	// does not answer in time is counted absent.
	positionTimeout = 250 * time.Millisecond
	// hangUpRechecks is how many more ticks probe the leader after a
	// connection from another master ended while the leader answered.
	hangUpRechecks = 2
)

// successionWatch is a master's watch over its leader (run).
type successionWatch struct {
	m      *Master
	timing succession.Timing
	// kick asks for a probe now: another survivor found the leader's
	// process gone.
	kick chan string
}

func newSuccessionWatch(m *Master) *successionWatch {
	return &successionWatch{m: m, timing: succession.TimingFor(m.cfg.RaftHeartbeatTimeout), kick: make(chan string, 1)}
}

// run watches the leader until the master stops. It ticks twice per probe
// interval; each tick reads Raft's view of the leader (cheap reads of
// Raft's own fields) and probes when package succession says so, or at
// once when a connection from another master ended (a leader's all end
// when its process dies) or another survivor found the leader's process
// gone. Once it has acted on a leader it does not act again until the
// leader changes.
func (w *successionWatch) run() {
	m := w.m
	tick := time.NewTicker(w.timing.ProbeEvery / 2)
	defer tick.Stop()
	var lastProbe time.Time
	var actedOn raft.ServerID
	// recheck counts the ticks that still probe after a hang-up: a dying
	// process may close its connections before its listener.
	var recheck int
	for {
		var asked string
		var hungUp bool
		select {
		case <-m.stop:
			return
		case <-tick.C:
		case asked = <-w.kick:
		case <-m.rp.inboundClosed:
			hungUp = true
		}
		addr, id := m.raft.LeaderWithID()
		if id != actedOn {
			actedOn = ""
		}
		if m.raft.State() != raft.Follower || id == "" || actedOn != "" {
			lastProbe, recheck = time.Time{}, 0
			continue
		}
		// Raft's clock: LastContact is Raft's reading of time.Now.
		f := succession.Follower{Now: time.Now(), Leader: string(id), LastContact: m.raft.LastContact(), LastProbe: lastProbe}
		var probe bool
		switch {
		case hungUp:
			probe, recheck = true, hangUpRechecks
		case asked == string(id):
			probe = true
		case recheck > 0:
			probe = true
			recheck--
		default:
			probe = w.timing.ShouldProbe(f)
		}
		if !probe {
			continue
		}
		lastProbe = f.Now
		if !processGone(string(addr)) {
			continue
		}
		actedOn, recheck = id, 0
		w.succeed(id)
	}
}

// processGone reports whether a connection to addr is refused: nothing
// listens there, so the process that did is gone. Any other outcome
// (accepted, timed out, unreachable) is no evidence.
func processGone(addr string) bool {
	refused, _ := probe(addr)
	return refused
}

// probe connects to addr: refused, or accepted, or neither (timed out,
// unreachable).
func probe(addr string) (refused, accepted bool) {
	c, err := net.DialTimeout("tcp", addr, probeTimeout)
	if err == nil {
		c.Close()
		return false, true
	}
	return errors.Is(err, syscall.ECONNREFUSED), false
}

// reaches reports whether this master's leader is gone (by id) and a
// connection to its Raft port is accepted now.
func (w *successionWatch) reaches(gone string) bool {
	addr, id := w.m.raft.LeaderWithID()
	if string(id) != gone || addr == "" {
		return false
	}
	_, accepted := probe(string(addr))
	return accepted
}

// succeed gathers the survivors' positions and stands if this master's
// log is ahead of theirs.
func (w *successionWatch) succeed(dead raft.ServerID) {
	m := w.m
	self, err := w.position()
	if err != nil {
		m.log.Warn("leader's process is gone; cannot read this master's log position", "leader", dead, "err", err)
		return
	}
	servers := m.raft.GetConfiguration().Configuration().Servers
	if !slices.ContainsFunc(servers, func(s raft.Server) bool {
		return string(s.ID) == m.cfg.NodeID && s.Suffrage == raft.Voter
	}) {
		return // a master staged (a non-voter) cannot be elected
	}
	var peers []succession.Position
	var mu sync.Mutex
	var wg sync.WaitGroup
	voters := 0
	for _, s := range servers {
		if s.Suffrage != raft.Voter {
			continue
		}
		voters++
		if s.ID == dead || string(s.ID) == m.cfg.NodeID {
			continue
		}
		mem, ok := m.gossip.Get(string(s.ID))
		if !ok || mem.Meta.HTTPAddr == "" {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			p, err := w.askPosition(mem.Meta.HTTPAddr, string(s.ID), string(dead))
			if err != nil {
				m.log.Debug("survivor's position unknown", "master", s.ID, "err", err)
				return
			}
			mu.Lock()
			peers = append(peers, p)
			mu.Unlock()
		}()
	}
	wg.Wait()
	d := succession.Decide(self, peers, voters)
	m.log.Info("leader's process is gone", "leader", dead, "stand", d.Stand, "nominee", d.Nominee, "why", d.Reason,
		"term", self.Term, "index", self.Index, "survivors_answered", len(peers))
	outcome := "deferred"
	switch {
	case d.Nominee == "":
		outcome = "no_quorum"
	case !d.Stand:
	case !w.stillFollows(dead):
		// Another survivor won meanwhile: this one follows it.
	default:
		outcome = "stood"
		if err := w.stand(); err != nil {
			m.log.Warn("could not stand for election", "err", err)
		}
	}
	m.metrics.successions.WithLabelValues(outcome).Inc()
}

// stillFollows reports whether this master is still a follower of dead.
func (w *successionWatch) stillFollows(dead raft.ServerID) bool {
	_, id := w.m.raft.LeaderWithID()
	return id == dead && w.m.raft.State() == raft.Follower
}

// position is this master's last entry, as Raft's vote compares it: the
// later of its log's last and its last snapshot's (a follower that just
// installed a snapshot may have no log after it).
func (w *successionWatch) position() (succession.Position, error) {
	st := w.m.raft.Stats()
	var n [4]uint64
	var errs []error
	for i, k := range []string{"last_log_term", "last_log_index", "last_snapshot_term", "last_snapshot_index"} {
		var err error
		n[i], err = strconv.ParseUint(st[k], 10, 64)
		errs = append(errs, err)
	}
	if err := errors.Join(errs...); err != nil {
		return succession.Position{}, err
	}
	term, index := n[0], n[1]
	if n[3] > index {
		term, index = n[2], n[3]
	}
	return succession.Position{ID: w.m.cfg.NodeID, Term: term, Index: index}, nil
}

// askPosition asks the master at addr for its position, telling it that
// the leader gone's process is gone.
func (w *successionWatch) askPosition(addr, id, gone string) (succession.Position, error) {
	a, err := w.fetchPosition(addr, id, gone)
	if err != nil {
		return succession.Position{}, err
	}
	return succession.Position{ID: a.ID, Term: a.Term, Index: a.Index, Reaches: a.Reaches}, nil
}

// fetchPosition asks master id at addr for its position answer (gone, if
// not "", is the leader whose process is gone).
func (w *successionWatch) fetchPosition(addr, id, gone string) (positionAnswer, error) {
	ctx, cancel := context.WithTimeout(context.Background(), positionTimeout)
	defer cancel()
	var a positionAnswer
	path := raftPositionPath
	if gone != "" {
		path += "?gone=" + url.QueryEscape(gone)
	}
	u, err := transport.PeerURL(w.m.client, addr, path)
	if err != nil {
		return a, err
	}
	if err := transport.GetJSON(ctx, w.m.client, u, &a); err != nil {
		return a, err
	}
	if a.ID != id {
		return a, errors.New("answered as " + strconv.Quote(a.ID))
	}
	return a, nil
}

// stand makes this master's Raft a candidate now, through the request a
// leader sends the target of a leadership transfer (TimeoutNow), sent to
// itself. Its vote requests then carry the transfer's flag, which has the
// other survivors vote although they still count the dead leader theirs.
func (w *successionWatch) stand() error {
	m := w.m
	var resp raft.TimeoutNowResponse
	id, addr := raft.ServerID(m.cfg.NodeID), raft.ServerAddress(m.rp.advertise)
	req := &raft.TimeoutNowRequest{RPCHeader: raft.RPCHeader{ProtocolVersion: raft.ProtocolVersionMax, ID: []byte(id), Addr: []byte(addr)}}
	return m.rp.transport.TimeoutNow(id, addr, req, &resp)
}

// raftPosition serves raftPositionPath to the other masters.
func (m *Master) raftPosition(w http.ResponseWriter, r *http.Request) {
	var reaches bool
	if gone := r.URL.Query().Get("gone"); gone != "" {
		select {
		case m.succession.kick <- gone:
		default:
		}
		reaches = m.succession.reaches(gone)
	}
	p, err := m.succession.position()
	if err != nil {
		writeError(w, http.StatusServiceUnavailable, err.Error())
		return
	}
	writeJSON(w, http.StatusOK, positionAnswer{ID: p.ID, Term: p.Term, Index: p.Index, Reaches: reaches, HoldsVotes: m.rp.guard.HoldingVotes()})
}
