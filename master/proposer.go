package master

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
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
	// ctx is the caller's: a proposal whose caller has stopped waiting
	// before run took it is not proposed (a stopped leader session's
	// decisions must not land after it stopped).
	ctx    context.Context
	data   []byte
	n      int // commands in data
	weight int // what applying it costs (subtasks submitted); see maxEntryWeight
	// settled, if set, is called once the proposal's outcome is known:
	// its entry applied or failed, or it was never proposed. A caller
	// that gives up waiting has not settled it.
	settled func()
	// submissions: the commands are jobs submitted by callers that
	// may send their next one once answered (see convoy).
	submissions bool
	once        sync.Once
	reply       chan proposalReply
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
	return p.propose(ctx, &proposal{n: len(cmds)}, cmds)
}

// ProposeSubmissions is Propose of job submissions, whose applying costs
// weight (the subtasks they submit): an entry carries proposals of at
// most maxEntryWeight together, and waits briefly for other callers'
// submissions (convoy). settled (if not nil) is called once their outcome
// is known, even after ctx ended: their entry applied or failed, or they
// were never proposed.
func (p *proposer) ProposeSubmissions(ctx context.Context, weight int, settled func(), cmds ...fsm.Command) ([]fsm.Result, uint64, error) {
	return p.propose(ctx, &proposal{n: len(cmds), weight: weight, settled: settled, submissions: true}, cmds)
}

func (p *proposer) propose(ctx context.Context, pr *proposal, cmds []fsm.Command) ([]fsm.Result, uint64, error) {
	pr.ctx, pr.reply = ctx, make(chan proposalReply, 1)
	if err := ctx.Err(); err != nil {
		// Ended already: the select below would pick the queue or ctx
		// at random, and a queued proposal is committed though its
		// caller is told it was not.
		pr.settle()
		return nil, 0, err
	}
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
		case <-p.stop:
			// run is ending: once it has, whether it took pr is known.
			// One queued after it drained the queue is settled here,
			// or by nobody.
			<-p.done
			if !pr.taken {
				pr.settle()
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
	var lastCommit atomic.Int64 // the last entry's time from proposal to applied
	var c convoy
	var batch []*proposal
	var next *proposal // taken, and left for the next entry (its weight)
	for {
		// Room first: what queued while the entry in flight committed
		// goes in the next one.
		select {
		case inflight <- struct{}{}:
		case <-p.stop:
			if next != nil {
				next.answer(proposalReply{err: errShutdown})
			}
			p.drain()
			return
		}
		free := time.Now()
		c.commit = time.Duration(lastCommit.Load())
		batch = batch[:0]
		var size, n, weight, subs int
		mixed := false // the entry carries more than submissions
		// add puts pr in the entry, or leaves it for the next one if
		// the entry is full; it reports whether it did.
		add := func(pr *proposal) bool {
			pr.taken = true
			if err := pr.ctx.Err(); err != nil {
				pr.answer(proposalReply{err: err}) // its caller has gone
				return true
			}
			if len(batch) > 0 && (weight+pr.weight > maxEntryWeight || size+len(pr.data) > maxBatchBytes || n+pr.n > maxBatchCmds) {
				next = pr
				return false
			}
			batch = append(batch, pr)
			size += len(pr.data)
			n += pr.n
			weight += pr.weight
			if pr.submissions {
				subs += pr.n
			} else {
				mixed = true
			}
			return true
		}
		// take adds what is queued, waiting for it until timeout (nil:
		// not at all) or until the entry holds want submissions.
		take := func(want int, timeout <-chan time.Time) {
			for next == nil && (timeout == nil || (!mixed && subs < want)) {
				select {
				case pr := <-p.queue:
					if !add(pr) {
						return
					}
					continue
				case <-p.stop:
					return
				default:
				}
				if timeout == nil {
					return
				}
				select {
				case pr := <-p.queue:
					if !add(pr) {
						return
					}
				case <-timeout:
					return
				case <-p.stop:
					return
				}
			}
		}
		if pr := next; pr != nil {
			next = nil
			add(pr)
		}
		take(0, nil)
		queued := subs
		for len(batch) == 0 {
			select {
			case pr := <-p.queue:
				add(pr)
			case <-p.stop:
				<-inflight
				p.drain()
				return
			}
		}
		if want, wait := c.hold(queued); !mixed && subs < want && wait > 0 {
			timer := time.NewTimer(time.Until(free.Add(wait)))
			take(want, timer.C)
			timer.Stop()
		}
		take(0, nil)
		select {
		case <-p.stop:
			for _, pr := range batch {
				pr.answer(proposalReply{err: errShutdown})
			}
			if next != nil {
				next.answer(proposalReply{err: errShutdown})
			}
			p.drain()
			return
		default:
		}
		// A caller that went while the entry waited is answered, and its
		// commands left out.
		entry := make([]byte, 0, size)
		live := batch[:0]
		for _, pr := range batch {
			if err := pr.ctx.Err(); err != nil {
				pr.answer(proposalReply{err: err})
				if pr.submissions {
					subs -= pr.n
				}
				continue
			}
			live = append(live, pr)
			entry = append(entry, pr.data...)
		}
		batch = live
		if len(batch) == 0 {
			<-inflight // every caller went: no entry
			continue
		}
		c.last = subs
		proposed := time.Now()
		f := p.raft.Apply(entry, enqueueTimeout)
		go func(b []*proposal) {
			_ = f.Error() // the entry applied or failed: the next may go
			lastCommit.Store(int64(time.Since(proposed)))
			<-inflight
			answerProposals(f, b)
		}(append([]*proposal(nil), batch...))
	}
}

// convoy decides how long the proposer holds an entry back for the
// submissions of callers on their way back. With one entry in flight, a
// submission that arrives just after an entry left waits for that whole
// entry's commit, and the callers it answers return while the next entry
// is in flight: closed-loop callers split into groups that take turns,
// each waiting two commits a write. Three callers, one per master, made
// entries of 1.5 submissions (the leader's own caller alone, then the two
// relayed ones). So once the entry in flight has applied, the next one
// waits, briefly, for as many submissions as the last entry carried plus
// those that queued while it was in flight: the callers answered come
// back within a round trip, and go together. A caller that does not come
// back costs the wait once, at most half a commit (and no more than
// maxConvoyWait); the next entry expects fewer.
//
// It is a pure decision: the proposer's loop measures the times and
// counts it takes.
type convoy struct {
	last   int           // submissions the last entry carried
	commit time.Duration // the last entry's time from proposal to applied
}

// maxConvoyWait bounds how long an entry waits for callers coming back,
// whatever the commit's time (a slow disk's commit does not make callers
// return any slower).
const maxConvoyWait = 2 * time.Millisecond

// hold is what the next entry waits for: want submissions in all (queued:
// those that queued while the last entry was in flight), for at most
// wait after the last entry applied. An entry that carries anything but
// submissions (a fence, a leader's command) goes at once.
func (c convoy) hold(queued int) (want int, wait time.Duration) {
	if c.last == 0 {
		return queued, 0
	}
	return c.last + queued, min(c.commit/2, maxConvoyWait)
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
