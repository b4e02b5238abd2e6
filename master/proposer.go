package master

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/hashicorp/raft"

	"jobmaster/fsm"
	"jobmaster/jobspec"
)

// proposer batches commands from many callers into Raft entries: one entry
// carries every command queued while the entries in flight (at most
// maxEntriesInFlight) were being committed, up to maxBatchBytes, so
// throughput grows with the number of concurrent callers rather than with
// fsyncs.
//
// Goroutines: run owns the queue and hands entries to Raft; one short-lived
// goroutine per entry in flight waits for its future and answers callers.
type proposer struct {
	raft  *raft.Raft
	queue chan *proposal
	stop  chan struct{}
	done  chan struct{}
}

// errShutdown: the master is stopping; the command may or may not commit.
var errShutdown = errors.New("master is shutting down")

const (
	maxBatchBytes   = 1 << 20
	maxBatchCmds    = 4096
	enqueueTimeout  = 5 * time.Second
	proposalBacklog = 8192
	// maxEntriesInFlight bounds the entries handed to Raft and not yet
	// applied: while one is, commands queue, and the next entry carries
	// them all (group commit). Each entry costs a log record, a bolt commit
	// (two fsyncs) on every master, a replication message, an FSM dispatch
	// and a future, so fewer, fuller entries cost less per command; and a
	// second entry in flight would wait for the first one's commit anyway
	// (hashicorp/raft's leader writes its log before it replicates). `go
	// run ./bench/cmd/jmbench -only submission -clients 3,64`, one, then
	// two (the ratio to etcd's puts in the same run): 3 clients 0.83x and
	// 0.65x, 64 clients 1.07x and 1.06x.
	maxEntriesInFlight = 1
	// maxEntryWeight bounds the weight of the proposals one entry carries
	// (but for a lone proposal, which goes whole): every master applies an
	// entry in one go, holding its state, and a job's subtasks are what
	// applying its submission costs.
	maxEntryWeight = jobspec.MaxTotalSubtasks
)

type proposal struct {
	data   []byte
	n      int // commands in data
	weight int // what applying it costs (subtasks submitted); see maxEntryWeight
	// settled, if set, is called once the proposal's outcome is known:
	// its entry applied or failed, or it was never proposed. A caller
	// that gives up waiting has not settled it.
	settled func()
	once    sync.Once
	reply   chan proposalReply
	// taken: run took it from the queue, and so answers it. Written by
	// run only, read by Propose once run has ended.
	taken bool
}

type proposalReply struct {
	results []fsm.Result
	index   uint64
	err     error
}

func newProposer(r *raft.Raft) *proposer {
	p := &proposer{raft: r, queue: make(chan *proposal, proposalBacklog), stop: make(chan struct{}), done: make(chan struct{})}
	go p.run()
	return p
}

// Propose commits commands (in one entry, in order) and returns their
// results and the entry's index. An error other than a context error means
// the commands were not applied by this leader: raft.ErrNotLeader,
// raft.ErrLeadershipLost (the outcome is unknown: they may still commit),
// or errShutdown.
func (p *proposer) Propose(ctx context.Context, cmds ...fsm.Command) ([]fsm.Result, uint64, error) {
	return p.ProposeWeighted(ctx, 0, nil, cmds...)
}

// ProposeWeighted is Propose of commands whose applying costs weight (the
// subtasks they submit): an entry carries proposals of at most
// maxEntryWeight together. settled (if not nil) is called once their
// outcome is known, even after ctx ended: their entry applied or failed,
// or they were never proposed.
func (p *proposer) ProposeWeighted(ctx context.Context, weight int, settled func(), cmds ...fsm.Command) ([]fsm.Result, uint64, error) {
	pr := &proposal{n: len(cmds), weight: weight, settled: settled, reply: make(chan proposalReply, 1)}
	for _, c := range cmds {
		var err error
		if pr.data, err = fsm.Encode(pr.data, c); err != nil {
			pr.settle()
			return nil, 0, err
		}
	}
	select {
	case p.queue <- pr:
	case <-ctx.Done():
		pr.settle()
		return nil, 0, ctx.Err()
	case <-p.stop:
		pr.settle()
		return nil, 0, errShutdown
	}
	select {
	case r := <-pr.reply:
		return r.results, r.index, r.err
	case <-ctx.Done():
		select {
		case <-p.done:
			if !pr.taken {
				pr.settle() // queued as run stopped: nothing will take it
			}
		default:
		}
		return nil, 0, ctx.Err()
	case <-p.done:
		// Queued as run stopped, after it drained the queue: nothing
		// will take it. One run took is answered (its entry's outcome).
		if !pr.taken {
			pr.settle()
			return nil, 0, errShutdown
		}
	}
	select {
	case r := <-pr.reply:
		return r.results, r.index, r.err
	case <-ctx.Done():
		return nil, 0, ctx.Err()
	}
}

// Fence commits an entry that carries no command, proposed after the call
// began, and returns once it is applied here. A consistent read waits for
// it: the entry commits only if a quorum took it from this leader in its
// term, which no follower does once it has voted in a newer term, so every
// write acknowledged before the read began (by this leader or a newer one)
// is in the state the read sees. Raft's VerifyLeader is not enough for
// that: it counts a follower's answer to a heartbeat sent before the call,
// which a leader that was paused while another was elected may read only
// after it resumes. Fences share entries with the commands in flight, so
// under load they cost no entry of their own.
func (p *proposer) Fence(ctx context.Context) error {
	_, _, err := p.Propose(ctx)
	return err
}

// ProposeOne commits one command and returns its result; a command the FSM
// rejected comes back as the error.
func (p *proposer) ProposeOne(ctx context.Context, c fsm.Command) (fsm.Result, error) {
	rs, _, err := p.Propose(ctx, c)
	if err != nil {
		return fsm.Result{}, err
	}
	if len(rs) != 1 {
		return fsm.Result{}, fmt.Errorf("%s: %d results", c.Type(), len(rs))
	}
	return rs[0], rs[0].Err
}

func (p *proposer) run() {
	defer close(p.done)
	inflight := make(chan struct{}, maxEntriesInFlight)
	var batch []*proposal
	var next *proposal // taken, and left for the next entry (its weight)
	for {
		batch = batch[:0]
		if next != nil {
			batch, next = append(batch, next), nil
		} else {
			select {
			case pr := <-p.queue:
				pr.taken = true
				batch = append(batch, pr)
			case <-p.stop:
				p.drain()
				return
			}
		}
		// Wait for room before filling the entry: what queues meanwhile
		// goes in it.
		select {
		case inflight <- struct{}{}:
		case <-p.stop:
			batch[0].answer(proposalReply{err: errShutdown})
			p.drain()
			return
		}
		size, n, weight := len(batch[0].data), batch[0].n, batch[0].weight
	fill:
		for size < maxBatchBytes && n < maxBatchCmds {
			select {
			case pr := <-p.queue:
				pr.taken = true
				if weight+pr.weight > maxEntryWeight {
					next = pr
					break fill
				}
				batch = append(batch, pr)
				size += len(pr.data)
				n += pr.n
				weight += pr.weight
			default:
				break fill
			}
		}
		entry := make([]byte, 0, size)
		for _, pr := range batch {
			entry = append(entry, pr.data...)
		}
		f := p.raft.Apply(entry, enqueueTimeout)
		go func(b []*proposal) {
			_ = f.Error() // the entry applied or failed: the next may go
			<-inflight
			answerProposals(f, b)
		}(append([]*proposal(nil), batch...))
	}
}

// answerProposals waits for an entry to commit and hands each caller its results.
func answerProposals(f raft.ApplyFuture, batch []*proposal) {
	if err := f.Error(); err != nil {
		err = applyError(err)
		for _, pr := range batch {
			pr.answer(proposalReply{err: err})
		}
		return
	}
	results, _ := f.Response().([]fsm.Result)
	idx := f.Index()
	for _, pr := range batch {
		if len(results) < pr.n {
			pr.answer(proposalReply{err: fmt.Errorf("entry %d: %d results for %d commands", idx, len(results), pr.n)})
			continue
		}
		pr.answer(proposalReply{results: results[:pr.n:pr.n], index: idx})
		results = results[pr.n:]
	}
}

// errLogStore: the leader could not write an entry to its own log (a full
// or failing disk). hashicorp/raft then answers the entry with the log
// store's error, unwrapped, and steps down: the entry was neither written
// nor sent to anyone, and goes to the next leader (retryable).
var errLogStore = errors.New("the leader could not write to its Raft log, and stepped down")

// applyError is an entry's error as the callers take it: raft's own
// errors as they are; any other is the leader's log store's (the one other
// error an entry gets), errLogStore.
func applyError(err error) error {
	for _, known := range []error{raft.ErrNotLeader, raft.ErrLeadershipLost, raft.ErrRaftShutdown, raft.ErrAbortedByRestore,
		raft.ErrEnqueueTimeout, raft.ErrLeadershipTransferInProgress, raft.ErrNothingNewToSnapshot} {
		if errors.Is(err, known) {
			return err
		}
	}
	return fmt.Errorf("%w: %v", errLogStore, err)
}

// answer hands the proposal its outcome, and settles it.
func (pr *proposal) answer(r proposalReply) {
	pr.reply <- r
	pr.settle()
}

// settle calls settled, once.
func (pr *proposal) settle() {
	if pr.settled != nil {
		pr.once.Do(pr.settled)
	}
}

func (p *proposer) drain() {
	for {
		select {
		case pr := <-p.queue:
			pr.taken = true
			pr.answer(proposalReply{err: errShutdown})
		default:
			return
		}
	}
}

func (p *proposer) close() {
	close(p.stop)
	<-p.done
}
