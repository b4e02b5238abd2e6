package master

import (
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
	raftboltdb "github.com/hashicorp/raft-boltdb/v2"
	"go.etcd.io/bbolt"

	"jobmaster/fsm"
	"jobmaster/internal/raftguard"
	"jobmaster/membership"
	"jobmaster/transport"
)

// raftParts are the Raft node and everything it owns that must be closed.
type raftParts struct {
	raft      *raft.Raft
	transport *raft.NetworkTransport
	// guard is the transport as Raft sees it: a follower commits only
	// what a request proves (package raftguard).
	guard *raftguard.Guard
	store *raftboltdb.BoltStore
	snaps raft.SnapshotStore
	// hadState is set when the data dir held Raft state at start: the node
	// belongs to a cluster and never bootstraps.
	hadState bool
	// dir is the Raft directory (log, stable store, snapshots).
	dir string
	// noMarker: the vote marker is known gone (the log holds an entry);
	// watchMembership's only.
	noMarker bool
	// advertise is the Raft address the other masters dial.
	advertise string
	// inboundClosed is signalled when a connection another master opened
	// to this one's Raft port ends (newRaftTransport).
	inboundClosed chan struct{}
}

// voteMarker is the file, in the Raft directory, that lets a master
// starting without Raft state vote at once: a founder of a new cluster
// writes it before it gossips its proposal (it has acknowledged nothing,
// and a restart before its first entry must not hold its vote), and an
// operator creates it to accept that what an emptied master had
// acknowledged may be lost (docs/operations.md). Losing the log loses it
// too; a master with Raft state removes it.
const voteMarker = "vote-while-empty"

// markVoter writes the vote marker, durably, in the Raft directory dir.
func markVoter(dir string) error {
	f, err := os.OpenFile(filepath.Join(dir, voteMarker), os.O_CREATE|os.O_WRONLY, 0o600)
	if err != nil {
		return err
	}
	err = errors.Join(f.Sync(), f.Close())
	if d, derr := os.Open(dir); derr == nil {
		err = errors.Join(err, d.Sync(), d.Close())
	}
	return err
}

// dropVoteMarker removes the vote marker from the Raft directory dir,
// durably: left beside a log, it would let the master vote at once should
// the log alone be lost later.
func dropVoteMarker(dir string) error {
	if err := os.Remove(filepath.Join(dir, voteMarker)); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	return errors.Join(d.Sync(), d.Close())
}

func fileExists(p string) bool {
	_, err := os.Lstat(p)
	return err == nil
}

// openRaft starts Raft over TCP (under mutual TLS with tl) with a bolt log
// and stable store (fsync on) and file snapshots (3 retained).
func openRaft(cfg *Config, f *fsm.FSM, tl *transport.TLS) (*raftParts, error) {
	dir := filepath.Join(cfg.DataDir, "raft")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	var out io.Writer = cfg.RaftLog
	if cfg.RaftLogJSON {
		// In JSON, through the node's logger: one shape for every line.
		out = &raftLogBridge{logger: cfg.Logger}
	}
	logger := hclog.New(&hclog.LoggerOptions{
		Name:       "raft",
		Level:      hclog.LevelFromString(cfg.RaftLogLevel),
		Output:     out,
		JSONFormat: cfg.RaftLogJSON,
		Exclude:    newRepeatLimit(raftRepeatWindow, time.Now).exclude,
	}).With("node", cfg.NodeID)
	rc := raft.DefaultConfig()
	rc.LocalID = raft.ServerID(cfg.NodeID)
	rc.Logger = logger
	rc.HeartbeatTimeout = cfg.RaftHeartbeatTimeout
	rc.ElectionTimeout = cfg.RaftElectionTimeout
	rc.LeaderLeaseTimeout = cfg.RaftHeartbeatTimeout
	rc.CommitTimeout = 10 * time.Millisecond
	rc.BatchApplyCh = true
	rc.MaxAppendEntries = 256
	rc.SnapshotThreshold = 16384
	rc.TrailingLogs = 10240

	// The log's freelist is not written at every commit (bolt rebuilds it
	// when it opens the file), as Consul runs it: every Raft append is a
	// bolt commit with an fsync, and the freelist was a second write each
	// time.
	store, err := raftboltdb.New(raftboltdb.Options{Path: filepath.Join(dir, "raft.db"),
		BoltOptions: &bbolt.Options{NoFreelistSync: true, Timeout: time.Second}})
	if errors.Is(err, bbolt.ErrTimeout) {
		return nil, fmt.Errorf("open raft log: %s is locked by another process: another master runs with --data-dir %s; each master needs a data directory of its own", filepath.Join(dir, "raft.db"), cfg.DataDir)
	}
	if err != nil {
		return nil, fmt.Errorf("open raft log: %w", err)
	}
	p := &raftParts{store: store, dir: dir, inboundClosed: make(chan struct{}, 1)}
	fail := func(err error) (*raftParts, error) {
		p.close()
		return nil, err
	}
	cache, err := raft.NewLogCache(1024, store)
	if err != nil {
		return fail(err)
	}
	snaps, err := raft.NewFileSnapshotStoreWithLogger(dir, 3, logger)
	if err != nil {
		return fail(fmt.Errorf("open snapshots: %w", err))
	}
	p.snaps = snaps
	advAddr, err := membership.Advertise(cfg.RaftAddr)
	if err != nil {
		return fail(fmt.Errorf("--raft-addr: %w", err))
	}
	p.advertise = advAddr
	advertise, err := net.ResolveTCPAddr("tcp", advAddr)
	if err != nil {
		return fail(fmt.Errorf("--raft-addr %q: %w", cfg.RaftAddr, err))
	}
	trans, err := newRaftTransport(cfg.RaftAddr, advertise, tl, &raft.NetworkTransportConfig{
		MaxPool: 3,
		Timeout: 5 * time.Second,
		Logger:  logger,
	}, p.inboundClosed)
	if err != nil {
		return fail(fmt.Errorf("raft transport on %s: %w", cfg.RaftAddr, err))
	}
	p.transport = trans
	p.hadState, err = raft.HasExistingState(cache, store, snaps)
	if err != nil {
		return fail(err)
	}
	guard := raftguard.New(trans)
	p.guard = guard
	switch marker := filepath.Join(dir, voteMarker); {
	case p.hadState:
		p.noMarker = dropVoteMarker(dir) == nil // it matters only to an empty log
	case !fileExists(marker):
		// Its log may have been lost (raftguard: HoldVotes): no vote until
		// a leader has brought it up to date, or it founds a new cluster.
		guard.HoldVotes()
	}
	r, err := raft.NewRaft(rc, f, cache, store, snaps, guard)
	if err != nil {
		return fail(fmt.Errorf("start raft: %w", err))
	}
	p.raft = r
	return p, nil
}

// close shuts Raft down and releases its transport and store, in the order
// that leaks no goroutines: Raft, the transport's streams, the transport,
// then the store.
func (p *raftParts) close() error {
	var errs []error
	if p.raft != nil {
		if err := p.raft.Shutdown().Error(); err != nil {
			errs = append(errs, err)
		}
	}
	if p.transport != nil {
		p.transport.CloseStreams()
		var err error
		if p.guard != nil {
			err = p.guard.Close()
		} else {
			err = p.transport.Close()
		}
		if err != nil {
			errs = append(errs, err)
		}
	}
	if p.store != nil {
		if err := p.store.Close(); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}
