package master

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"time"

	"github.com/hashicorp/raft"

	"jobmaster/api"
	"jobmaster/fsm"
	"jobmaster/jobspec"
	"jobmaster/membership"
	"jobmaster/transport"
)

// snapshotSave: GET /v1/operator/snapshot streams the replicated state (a
// backup). Served by the leader, or by this master with ?stale.
func (m *Master) snapshotSave(w http.ResponseWriter, r *http.Request, _ []byte, _ *session) error {
	c := m.fsm.Capture()
	w.Header().Set("Content-Type", "application/octet-stream")
	w.Header().Set("X-Jobmaster-Index", strconv.FormatUint(c.Index(), 10))
	w.WriteHeader(http.StatusOK)
	if r.Method == http.MethodHead {
		return nil // headers only: no snapshot written to be thrown away
	}
	if _, err := c.WriteTo(w); err != nil {
		m.log.Warn("snapshot save", "err", err)
	}
	return nil
}

// aclResetRefused says why a restore of st is refused, "" if it is not: a
// master that enforces ACLs, in a cluster bootstrapped already, does not
// take a snapshot from before the bootstrap unless asked to (?reset_acl):
// restored, anyone who reaches the cluster could bootstrap it and take a
// management token, until someone does. (A cluster whose management
// secrets are all lost is restored so on purpose, operations.md.)
func (m *Master) aclResetRefused(st *fsm.State, r *http.Request) string {
	if !m.cfg.ACL || st.ACLBootstrapped() {
		return ""
	}
	if queryFlag(r, "reset_acl") {
		return ""
	}
	var bootstrapped bool
	m.fsm.Read(func(s *fsm.State) { bootstrapped = s.ACLBootstrapped() })
	if !bootstrapped {
		return ""
	}
	return "the snapshot was taken before this cluster's ACL bootstrap (it holds no token): restored, anyone who reaches the cluster could bootstrap the ACLs and take a management token until someone does. " +
		"To reset the ACLs on purpose, restore it with ?reset_acl (jobmaster operator snapshot restore --reset-acl) and run 'jobmaster acl bootstrap' at once"
}

// snapshotRestore: PUT /v1/operator/snapshot replaces the cluster's state
// with a backup (disaster recovery). The snapshot is checked by restoring
// it aside before Raft installs it, so a bad file changes nothing. The
// leader then starts a new epoch: the restored state's is old.
func (m *Master) snapshotRestore(w http.ResponseWriter, r *http.Request) {
	// A backup may take longer to upload than the server's read timeout;
	// its size is bounded instead (--max-snapshot-bytes).
	_ = transport.Unbounded(w)
	if transport.DeclaredTooLarge(r, m.cfg.MaxSnapshotBytes) != nil {
		writeError(w, http.StatusRequestEntityTooLarge, fmt.Sprintf("snapshot larger than %d bytes (--max-snapshot-bytes); nothing was restored", m.cfg.MaxSnapshotBytes))
		return
	}
	body := &sizedBody{ReadCloser: http.MaxBytesReader(w, r.Body, m.cfg.MaxSnapshotBytes)}
	r.Body = body
	s := m.currentSession()
	if s == nil {
		addr := m.leaderHTTPAddr()
		// One hop only: a master that was forwarded this and does not lead
		// either has a stale view; the caller retries.
		if addr == "" || r.Header.Get(hopsHeader) != "" {
			w.Header().Set("Retry-After", "1")
			writeError(w, http.StatusServiceUnavailable, "no leader available; retry shortly")
			return
		}
		// Streamed once: a restore is not retried behind the caller's back.
		if !m.forwardStream(w, r, addr) {
			if body.tooBig {
				writeError(w, http.StatusRequestEntityTooLarge, fmt.Sprintf("snapshot larger than %d bytes (--max-snapshot-bytes); the leader restored nothing", m.cfg.MaxSnapshotBytes))
				return
			}
			writeError(w, http.StatusBadGateway, "the leader did not answer; the restore may or may not have happened")
		}
		return
	}
	// One restore at a time: the state announces one (fsm.RestoreIntent),
	// and two at once would have the next leader name the wrong one.
	if !m.restoring.TryLock() {
		writeError(w, http.StatusConflict, "another snapshot restore is in progress on this master; nothing was restored: wait for it to end")
		return
	}
	defer m.restoring.Unlock()
	tmp, err := os.CreateTemp(m.cfg.DataDir, "restore-*.snap")
	if err != nil {
		writeError(w, http.StatusInternalServerError, err.Error())
		return
	}
	defer os.Remove(tmp.Name())
	defer tmp.Close()
	size, err := io.Copy(tmp, r.Body)
	if err != nil {
		if tooBig := (*http.MaxBytesError)(nil); errors.As(err, &tooBig) {
			writeError(w, http.StatusRequestEntityTooLarge, fmt.Sprintf("snapshot larger than %d bytes (--max-snapshot-bytes)", m.cfg.MaxSnapshotBytes))
			return
		}
		writeError(w, http.StatusBadRequest, "reading snapshot: "+err.Error())
		return
	}
	if _, err := tmp.Seek(0, io.SeekStart); err != nil {
		writeError(w, http.StatusInternalServerError, err.Error())
		return
	}
	st, err := fsm.RestoreSized(tmp, size)
	if err != nil {
		writeError(w, http.StatusBadRequest, "cannot restore it: "+err.Error())
		return
	}
	if msg := m.aclResetRefused(st, r); msg != "" {
		writeError(w, http.StatusConflict, msg)
		return
	}
	// A restored cluster is a new cluster to the executors (its tokens start
	// over from the snapshot's): it gets a new id, written into the state
	// Raft installs, so the old cluster is fenced off whoever leads next.
	// The id is announced first, committed (fsm.RestoreIntent): should this
	// leader stop before the others have the restored state, the next
	// leader names it as a restore that did not take, and this master, if
	// it comes back with that state, learns it diverged and stops
	// (fsm/restoreintent.go).
	id := newClusterID()
	if _, err := m.prop.ProposeOne(r.Context(), &fsm.RestoreIntent{Fenced: s.fenced(), Cluster: id}); err != nil {
		w.Header().Set("Retry-After", "1")
		writeError(w, http.StatusServiceUnavailable, fmt.Sprintf("the restore could not be announced (%v); nothing was restored", err))
		return
	}
	st.RenameCluster(id)
	st.SetRestoring(id)
	var status int
	restore := func() error {
		// With no session running (replaceState), nothing more is
		// proposed on the state being replaced: what it reached is final.
		//
		// No execution id it used is used again (executors hold or
		// remember them; their directories and logs are theirs): the
		// backup went back in time, and its attempts start above. What
		// was committed is applied first (a Barrier), so nothing it
		// placed is missed.
		if err := m.raft.Barrier(time.Minute).Error(); err != nil {
			status = http.StatusServiceUnavailable
			return fmt.Errorf("the state to replace could not be read whole (%w); nothing was restored", err)
		}
		m.fsm.Read(st.CarryAttempts)
		// It stands past every index the cluster has seen (Raft installs
		// it after its last entry), on every master alike: each reader of
		// the event stream, wherever it reconnects, is told what it saw
		// is gone.
		st.SetIndex(m.raft.LastIndex() + 1)
		renamed, err := os.CreateTemp(m.cfg.DataDir, "restore-*.snap")
		if err != nil {
			status = http.StatusInternalServerError
			return err
		}
		defer os.Remove(renamed.Name())
		defer renamed.Close()
		size, err := st.Capture().WriteTo(renamed)
		if err == nil {
			_, err = renamed.Seek(0, io.SeekStart)
		}
		if err != nil {
			status = http.StatusInternalServerError
			return err
		}
		cfg := m.raft.GetConfiguration()
		if err := cfg.Error(); err != nil {
			status = http.StatusServiceUnavailable
			return err
		}
		// The state announces this restore, and no other: what the next
		// leader names as aborted, should this one not take, is this.
		var announced string
		m.fsm.Read(func(st *fsm.State) { announced = st.Restoring() })
		if announced != id {
			status = http.StatusConflict
			return fmt.Errorf("another restore (cluster %s) was announced meanwhile; nothing was restored", announced)
		}
		if m.cfg.beforeRestore != nil {
			m.cfg.beforeRestore()
		}
		meta := &raft.SnapshotMeta{Version: raft.SnapshotVersionMax, Index: st.Index(), Term: 1,
			Configuration: cfg.Configuration(), ConfigurationIndex: cfg.Index(), Size: size}
		if err := m.raft.Restore(meta, renamed, time.Minute); err != nil {
			return fmt.Errorf("restore: %w", err)
		}
		return nil
	}
	if err := m.replaceState(restore); err != nil {
		if status == 0 {
			// Raft's restore began, or this master stopped meanwhile: the
			// restored state may have reached the others, or not; unless
			// it was not installed here, and so reached no one.
			var installed bool
			m.fsm.Read(func(st *fsm.State) { installed = st.Cluster() == id })
			if !installed {
				writeError(w, http.StatusServiceUnavailable, fmt.Sprintf("the restore failed before its state was installed (%v); nothing was restored", err))
				return
			}
			writeError(w, http.StatusServiceUnavailable, fmt.Sprintf("the restore's outcome is unknown (%v): 'jobmaster members' shows the cluster id, a new one (%s) if it took; if not, restore again", err, id))
			return
		}
		writeError(w, status, err.Error())
		return
	}
	m.log.Warn("state restored from a snapshot", "jobs", st.NumJobs(), "executions", st.NumExecutions(), "cluster", st.Cluster())
	m.audit(r, "snapshot restore", "jobs", st.NumJobs(), "executions", st.NumExecutions(), "tokens", st.NumTokens())
	writeJSON(w, http.StatusOK, api.SnapshotRestored{Restored: true, Jobs: st.NumJobs(), Executions: st.NumExecutions(),
		ACLReset: m.cfg.ACL && !st.ACLBootstrapped()})
}

// sizedBody is a request body bounded by http.MaxBytesReader that says
// whether the bound was hit.
type sizedBody struct {
	io.ReadCloser
	tooBig bool
}

func (b *sizedBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if tooBig := (*http.MaxBytesError)(nil); errors.As(err, &tooBig) {
		b.tooBig = true
	}
	return n, err
}

// forwardStream relays a request whose body is streamed once. It returns
// false when no answer came (the request may have arrived).
func (m *Master) forwardStream(w http.ResponseWriter, r *http.Request, addr string) bool {
	u, err := transport.PeerURL(m.client, addr, r.URL.RequestURI())
	if err != nil {
		// Nothing was sent: gossip gave the leader an address no one dials.
		writeError(w, http.StatusBadGateway, fmt.Sprintf("the leader's address cannot be dialed (%v); the leader restored nothing", err))
		return true
	}
	req, err := http.NewRequestWithContext(r.Context(), r.Method, u, r.Body)
	if err != nil {
		return false
	}
	copyHeaders(req, r)
	req.Header.Set(hopsHeader, "1")
	resp, err := m.client.Do(req)
	if err != nil {
		return false
	}
	defer resp.Body.Close()
	for _, h := range []string{"Content-Type", "Retry-After"} {
		if v := resp.Header.Get(h); v != "" {
			w.Header().Set(h, v)
		}
	}
	w.WriteHeader(resp.StatusCode)
	_, _ = io.Copy(w, resp.Body)
	return true
}

// raftPeers: GET /v1/operator/raft/peers lists the Raft configuration.
func (m *Master) raftPeers(w http.ResponseWriter, _ *http.Request, _ []byte, _ *session) error {
	f := m.raft.GetConfiguration()
	if err := f.Error(); err != nil {
		return err
	}
	_, leader := m.raft.LeaderWithID()
	out := api.RaftPeers{Peers: []api.RaftPeer{}}
	for _, srv := range f.Configuration().Servers {
		out.Peers = append(out.Peers, api.RaftPeer{ID: string(srv.ID), Address: string(srv.Address),
			Voter: srv.Suffrage == raft.Voter, Leader: srv.ID == leader})
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

// removePeer: DELETE /v1/operator/raft/peers/{id} removes a master from the
// Raft configuration (a master gone for good).
func (m *Master) removePeer(w http.ResponseWriter, r *http.Request, _ []byte, _ *session) error {
	id := r.PathValue("id")
	if err := jobspec.CheckID(id); err != nil {
		writeError(w, http.StatusBadRequest, "master id: "+err.Error())
		return nil
	}
	f := m.raft.GetConfiguration()
	if err := f.Error(); err != nil {
		return err
	}
	found := false
	for _, srv := range f.Configuration().Servers {
		found = found || string(srv.ID) == id
	}
	if !found {
		writeError(w, http.StatusNotFound, fmt.Sprintf("no master %q in the Raft configuration: it was removed already, or never was one (jobmaster operator raft list-peers)", id))
		return nil
	}
	for _, mem := range m.gossip.Role(membership.RoleMaster) {
		// The leader adds back a master that is alive in gossip (and,
		// with TLS, proves its id at its Raft address): the removal would
		// be undone within a second (reconcileVotersOnce).
		if mem.ID == id && mem.Status == membership.StatusAlive && m.verifyServer(raft.ServerID(id), raft.ServerAddress(mem.Meta.RaftAddr)) == nil {
			writeError(w, http.StatusConflict, fmt.Sprintf("master %q is alive in gossip, and would be added back at once: stop it first, then remove it (if it is stopped, gossip has not noticed yet: retry in a few seconds)", id))
			return nil
		}
	}
	if err := m.raft.RemoveServer(raft.ServerID(id), 0, 10*time.Second).Error(); err != nil {
		return err
	}
	m.log.Info("master removed from the Raft configuration", "peer", id)
	m.audit(r, "raft peer remove", "master", id)
	writeJSON(w, http.StatusOK, map[string]string{"removed": id})
	return nil
}
