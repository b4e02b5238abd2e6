package fsm

import (
	"errors"
	"fmt"
	"sort"
)

// Errors returned in a command's Result. Callers match them with errors.Is.
var (
	// ErrStaleToken: the command carried a fencing token older than the
	// current epoch (or newer than any epoch); it changed nothing.
	ErrStaleToken = errors.New("stale fencing token")
	// ErrConflict: a job with this id exists with a different spec.
	ErrConflict = errors.New("a job with this id exists with a different spec")
	// ErrNotFound: no job with this id.
	ErrNotFound = errors.New("job not found")
	// ErrRejected: a placement no longer fits the state (the region is not
	// ready any more, or a slot is taken); it changed nothing.
	ErrRejected = errors.New("placement rejected")
)

// Result is the outcome of one command.
type Result struct {
	Err error
	// Epoch is set by establish-leadership: the new fencing token.
	Epoch uint64
	// events are the changes the command made, when the state records
	// them (RecordEvents): Events.
	events []record
	// Status is set by cancel-job: the job's status once it applied; and
	// Unchanged when the job was already ending or had ended, which the
	// cancel left as it was.
	Status    JobStatus
	Unchanged bool
	// Created is set by submit-job when the job is new, and by
	// bootstrap-acl and create-acl-token when the token is.
	Created bool
	// Placed lists, for place-region, the executions placed.
	Placed []Execution
	// Terminal lists, for report-executions, the ids whose terminal state is
	// recorded (now or before), so the executor may forget them.
	Terminal []string
}

// Events are the changes the command made, when the state records them
// (RecordEvents).
func (r Result) Events() []Event { return events(r.events) }

// EventsBut returns the events of the command that are not of topic t: a
// reader that wants the few job or executor events of a command that
// changed thousands of executions skips those without making them.
func (r Result) EventsBut(t Topic) []Event {
	var out []Event
	for i := range r.events {
		if x := &r.events[i]; x.topic() != t {
			out = append(out, x.event())
		}
	}
	return out
}

// String writes the result with its events as they read (a record's
// execution is a pointer, which two replicas' results do not share).
func (r Result) String() string {
	type plain Result
	p := plain(r)
	p.events = nil
	return fmt.Sprintf("%+v events %+v", p, r.Events())
}

// slotKey identifies a logical slot: subtask Index of a slot sharing group of
// a job. Executions with the same key share one executor slot.
type slotKey struct {
	job   string
	group string
	index int
}

// slotRef is an executor slot.
type slotRef struct {
	executor string
	slot     int
}

// slotUse is the occupant of an executor slot: the slot key it is held
// for (its group's entry in slotOf, and the index), and how many live
// executions use it. It is a value in the executor's map, 16 bytes: a
// pointer to a separate use with the key spelt out cost 70 bytes a slot.
type slotUse struct {
	g     *groupSlots
	index int32
	refs  int32
}

// key is the slot key the use is held for.
func (u slotUse) key() slotKey { return slotKey{u.g.job, u.g.group, int(u.index)} }

// regionRef names a region of a job.
type regionRef struct {
	job    string
	region int
}

// State is the replicated state. It is not safe for concurrent use; FSM
// wraps it with a lock. Fields below "derived" are indexes rebuilt from the
// rest on restore and are not part of the hash.
type State struct {
	index   uint64 // last applied log index
	epoch   uint64
	leader  string
	cluster string
	jobs    map[string]*Job
	execs   map[string]*Execution
	// forgotten remembers, per forgotten job id, the attempt its next
	// incarnation starts at, so that execution ids are never reused.
	forgotten map[string]Tombstone
	// floors are the attempt floors of pruned tombstones, by bucket
	// (generations.go).
	floors map[int]int
	// partitions are the result partitions held for consumers, by producer
	// execution id.
	partitions map[string]*Partition
	// tokens are the ACL tokens, by accessor id (acl.go); aclBootstrap is
	// the index of the bootstrap, 0 before it.
	tokens       map[string]*ACLToken
	aclBootstrap uint64
	// drains are the executors that drain, by id (drain.go).
	drains map[string]*Drain
	// restoring is the cluster id of a snapshot restore announced and not
	// settled yet by a leader (restoreintent.go).
	restoring string
	// diverged, not part of the state, is set on a master whose state is a
	// restore the leader named as aborted (restoreintent.go).
	diverged string

	// derived
	byExecutor map[string]execSet         // live, placed executions
	slots      map[string]map[int]slotUse // executor -> slot -> use
	slotOf     slotTable
	ready      readyQueue
	// joinable is the jobs that hold slots and have regions queued: where
	// a region that needs no new slot can be (sharingHeldSlots), so that a
	// pass with every slot taken looks at those only (noteJoinable).
	joinable   map[string]struct{}
	restarting map[regionRef]struct{}
	canceling  map[string]map[string]struct{} // executor -> CANCELING ids
	// live counts the current executions of each region that have not
	// ended, so that a job or a region learns it has nothing left running
	// without scanning its executions on every end (which made the end of
	// a job of n subtasks cost n squared).
	live map[regionRef]int
	// current holds, per job, vertex and subtask, the current attempt's
	// execution: walking a job's executions then builds no ids and looks
	// nothing up.
	current map[string][][]*Execution
	// partsOn indexes partitions by the executor that holds them.
	partsOn map[string]map[string]*Partition
	// specBytes sums the footprints of the jobs' specs
	// (jobspec.Spec.Footprint), for the leader's --max-spec-bytes.
	specBytes int64

	// event, while a command that is one failure event for every job it
	// touches applies (executor-lost), holds each job's restart decision
	// (decide); nil otherwise. It is not part of the state.
	event map[string]eventDecision
	// uncounted: the jobs whose UncountedRestarts this command has
	// counted (once a command: one more attempt at most for each subtask).
	uncounted map[string]bool

	// rec records the events of the entries applied (events.go); nil:
	// none. It is not part of the state.
	rec *recorder
	// tokenByHash indexes tokens by the hash of their secret; tokenGen
	// counts its changes (FSM republishes its TokenTable on a change).
	tokenByHash map[string]*ACLToken
	tokenGen    uint64
}

// NewState returns an empty state.
func NewState() *State {
	s := &State{
		jobs:       make(map[string]*Job),
		execs:      make(map[string]*Execution),
		forgotten:  make(map[string]Tombstone),
		floors:     make(map[int]int),
		partitions: make(map[string]*Partition),
		tokens:     make(map[string]*ACLToken),
		drains:     make(map[string]*Drain),
	}
	s.resetDerived()
	return s
}

func (s *State) resetDerived() {
	s.byExecutor = make(map[string]execSet)
	s.slots = make(map[string]map[int]slotUse)
	s.slotOf = make(slotTable)
	s.ready = newReadyQueue()
	s.joinable = make(map[string]struct{})
	s.restarting = make(map[regionRef]struct{})
	s.canceling = make(map[string]map[string]struct{})
	s.live = make(map[regionRef]int)
	s.current = make(map[string][][]*Execution)
	s.partsOn = make(map[string]map[string]*Partition)
	s.indexTokens()
}

// noteJoinable keeps job's place in joinable once its slots held or its
// regions queued have changed.
func (s *State) noteJoinable(job string) {
	if s.ready.jobs[job] > 0 && s.slotOf[job] != nil {
		s.joinable[job] = struct{}{}
	} else {
		delete(s.joinable, job)
	}
}

// currentOf returns job j's table of current executions, creating it.
func (s *State) currentOf(j *Job) [][]*Execution {
	c := s.current[j.ID]
	if c == nil {
		c = make([][]*Execution, len(j.Vertices))
		for vi := range j.Vertices {
			c[vi] = make([]*Execution, len(j.Vertices[vi].Attempts))
		}
		s.current[j.ID] = c
	}
	return c
}

// regionOf is the region an execution of job j belongs to.
func regionOf(j *Job, e *Execution) regionRef {
	return regionRef{j.ID, j.Vertices[e.VertexIndex].Region}
}

// ended records that a current execution of region ref has ended.
func (s *State) ended(ref regionRef) {
	if s.live[ref]--; s.live[ref] <= 0 {
		delete(s.live, ref)
	}
}

// regionLive reports whether region ri of job j has an execution that has
// not ended.
func (s *State) regionLive(j *Job, ri int) bool {
	return s.live[regionRef{j.ID, ri}] > 0
}

// Index is the last applied log index.
func (s *State) Index() uint64 { return s.index }

// Epoch is the current fencing token (0 before any leader established).
func (s *State) Epoch() uint64 { return s.epoch }

// Leader is the node that committed the current epoch.
func (s *State) Leader() string { return s.leader }

// Cluster is the cluster's id ("" until a leader names it).
func (s *State) Cluster() string { return s.cluster }

// RenameCluster gives a state a new cluster id. It is not a command: it is
// for a state restored from a backup before Raft installs it, which must
// not pass for the cluster it was saved from.
func (s *State) RenameCluster(id string) { s.cluster = id }

// SetIndex records that the log up to index has been applied (for entries
// that carry no commands, such as configuration changes).
func (s *State) SetIndex(index uint64) {
	if index > s.index {
		s.index = index
	}
}

// Apply applies one command committed at the given log index.
func (s *State) Apply(index uint64, c Command) Result {
	s.SetIndex(index)
	if c.Type() != TypeEstablishLeadership {
		if tok := c.token(); tok != s.epoch {
			return Result{Err: fmt.Errorf("%w: command token %d, epoch %d", ErrStaleToken, tok, s.epoch)}
		}
	}
	s.beginCommand("")
	s.uncounted = nil
	res := s.apply(index, c)
	var now int64
	if f, ok := c.(interface{ when() int64 }); ok {
		now = f.when()
	}
	if evs := s.endCommand(index, now); len(evs) > 0 {
		res.events = evs[:len(evs):len(evs)]
	}
	return res
}

func (s *State) apply(index uint64, c Command) Result {
	switch c := c.(type) {
	case *EstablishLeadership:
		s.epoch = index
		s.leader = c.Node
		if c.Cluster != "" {
			s.cluster = c.Cluster
		}
		s.settleRestore(c)
		s.emit(Event{Topic: TopicLeader, Type: EventLeader, Node: c.Node, Token: index})
		return Result{Epoch: index}
	case *SubmitJob:
		return s.applySubmit(index, c)
	case *CancelJob:
		return s.applyCancel(c)
	case *PlaceRegion:
		return s.applyPlace(index, c)
	case *ReportExecutions:
		return s.applyReport(index, c)
	case *FailExecutions:
		return s.applyFail(c)
	case *ExecutorLost:
		return s.applyExecutorLost(c)
	case *RestartRegions:
		return s.applyRestart(c)
	case *ForgetJobs:
		return s.applyForget(c)
	case *LosePartitions:
		return s.applyLosePartitions(c)
	case *BootstrapACL:
		return s.applyBootstrapACL(index, c)
	case *CreateACLToken:
		return s.applyCreateACLToken(index, c)
	case *DeleteACLToken:
		return s.applyDeleteACLToken(c)
	case *DrainExecutor:
		return s.applyDrain(c)
	case *UndrainExecutor:
		return s.applyUndrain(c)
	case *RestoreIntent:
		return s.applyRestoreIntent(c)
	case *MoveExecutor:
		return s.applyMove(c)
	}
	return Result{Err: fmt.Errorf("unknown command %T", c)}
}

// ApplyEntry decodes an entry and applies each of its commands.
func (s *State) ApplyEntry(index uint64, data []byte) []Result {
	cmds, err := Decode(data)
	s.expectEvents(eventsHint(cmds))
	out := make([]Result, 0, len(cmds)+1)
	for _, c := range cmds {
		out = append(out, s.Apply(index, c))
	}
	if err != nil {
		out = append(out, Result{Err: err})
	}
	if err != nil || len(cmds) == 0 {
		// A corrupt entry, or one with no command (a read fence, see
		// master's proposer.Fence), still moves the applied index.
		s.SetIndex(index)
	}
	return out
}

// execSet is a set of executions. A pointer key costs half the bytes of an
// id key with the pointer beside it, for each of a million placed
// executions.
type execSet map[*Execution]struct{}

// sorted returns the set's executions in id order; every iteration over a
// set that can change state goes through it.
func (m execSet) sorted() []*Execution {
	out := make([]*Execution, 0, len(m))
	for e := range m {
		out = append(out, e)
	}
	sort.Slice(out, func(a, b int) bool { return out[a].ID < out[b].ID })
	return out
}

// sortedKeys returns a map's keys in order; every iteration over a map that
// can change state goes through it.
func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
