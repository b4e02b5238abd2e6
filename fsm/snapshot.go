package fsm

import (
	"bufio"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"iter"
	"jobmaster/wire"
	"maps"
	"sort"
	"strings"

	"github.com/hashicorp/go-msgpack/v2/codec"
)

// snapshotFormat is the version of the snapshot stream. Restore accepts every
// version listed in the fixture tests under testdata/. Format 3 appended
// StartTime to each execution's array (older ones decode without it);
// format 4 appends the result partitions after the tombstones; format 5
// appends the ACL tokens after the partitions, and the header says whether
// and when the ACLs were bootstrapped; format 6 appends the executors'
// drains and then the attempt floors of pruned tombstones after the tokens. An older master refuses a newer format by number
// rather than misreading it.
const snapshotFormat = 6

// SnapshotFormat is the snapshot format this version writes (and the
// newest it reads), as `jobmaster version` reports it.
const SnapshotFormat = snapshotFormat

// snapshotHeader opens a snapshot stream; Jobs jobs, Execs executions,
// (from format 2) Tombstones tombstones, (from format 4) Partitions
// partitions, (from format 5) Tokens ACL tokens and (from format 6) Drains
// drains follow, each a msgpack
// value, in id order.
type snapshotHeader struct {
	Format int    `codec:"format"`
	Index  uint64 `codec:"index"`
	Epoch  uint64 `codec:"epoch"`
	Leader string `codec:"leader"`
	// Cluster: format 2, may be empty.
	Cluster string `codec:"cluster,omitempty"`
	// Restoring: a restore announced and not settled (restoreintent.go);
	// an older version drops it.
	Restoring string `codec:"restoring,omitempty"`
	Jobs      int    `codec:"jobs"`
	Execs     int    `codec:"execs"`
	// Tombstones: format 2.
	Tombstones int `codec:"tombs,omitempty"`
	// Partitions: format 4.
	Partitions int `codec:"parts,omitempty"`
	// Tokens and ACLBootstrap (the bootstrap's index, 0 before it):
	// format 5.
	Tokens       int    `codec:"toks,omitempty"`
	ACLBootstrap uint64 `codec:"aclb,omitempty"`
	// Drains and Floors: format 6.
	Drains int `codec:"drains,omitempty"`
	Floors int `codec:"floors,omitempty"`
}

// Capture is a point-in-time copy of the state, taken quickly under the
// FSM's lock and encoded later without it.
type Capture struct {
	header snapshotHeader
	jobs   []*Job
	execs  []Execution
	tombs  []Tombstone
	parts  []Partition
	tokens []ACLToken
	drains []Drain
	floors []Floor
}

// Capture copies the state.
func (s *State) Capture() *Capture {
	c := &Capture{
		header: snapshotHeader{Format: snapshotFormat, Index: s.index, Epoch: s.epoch, Leader: s.leader, Cluster: s.cluster, Restoring: s.restoring,
			Jobs: len(s.jobs), Execs: len(s.execs), Tombstones: len(s.forgotten), Partitions: len(s.partitions),
			Tokens: len(s.tokens), ACLBootstrap: s.aclBootstrap, Drains: len(s.drains), Floors: len(s.floors)},
		jobs:   make([]*Job, 0, len(s.jobs)),
		execs:  make([]Execution, 0, len(s.execs)),
		tombs:  make([]Tombstone, 0, len(s.forgotten)),
		parts:  make([]Partition, 0, len(s.partitions)),
		tokens: make([]ACLToken, 0, len(s.tokens)),
		drains: make([]Drain, 0, len(s.drains)),
		floors: s.Floors(),
	}
	for _, d := range s.drains {
		c.drains = append(c.drains, *d)
	}
	for _, t := range s.tokens {
		c.tokens = append(c.tokens, *t)
	}
	for _, p := range s.partitions {
		c.parts = append(c.parts, *p)
	}
	for _, t := range s.forgotten {
		c.tombs = append(c.tombs, t)
	}
	for _, j := range s.jobs {
		c.jobs = append(c.jobs, j.clone())
	}
	for _, e := range s.execs {
		c.execs = append(c.execs, *e)
	}
	return c
}

// clone deep-copies a job's mutable parts; the spec and the region shapes
// never change after submit and are shared.
func (j *Job) clone() *Job {
	c := *j
	c.Vertices = make([]VertexState, len(j.Vertices))
	for i, v := range j.Vertices {
		v.Attempts = append([]int(nil), v.Attempts...)
		v.Previous = append([]PreviousAttempt(nil), v.Previous...)
		c.Vertices[i] = v
	}
	c.Regions = append([]RegionState(nil), j.Regions...)
	c.Backoff.FailureTimes = append([]int64(nil), j.Backoff.FailureTimes...)
	return &c
}

// WriteTo streams the capture in id order, so equal states write equal
// bytes.
func (c *Capture) WriteTo(w io.Writer) (int64, error) {
	cw := &countingWriter{w: w}
	bw := bufio.NewWriterSize(cw, 256<<10)
	if err := c.encode(bw, c.header); err != nil {
		return cw.n, err
	}
	if err := bw.Flush(); err != nil {
		return cw.n, err
	}
	return cw.n, nil
}

func (c *Capture) encode(w io.Writer, h snapshotHeader) error {
	sort.Slice(c.jobs, func(a, b int) bool { return c.jobs[a].ID < c.jobs[b].ID })
	sort.Slice(c.execs, func(a, b int) bool { return c.execs[a].ID < c.execs[b].ID })
	sort.Slice(c.tombs, func(a, b int) bool { return c.tombs[a].ID < c.tombs[b].ID })
	sort.Slice(c.parts, func(a, b int) bool { return c.parts[a].ID < c.parts[b].ID })
	sort.Slice(c.tokens, func(a, b int) bool { return c.tokens[a].AccessorID < c.tokens[b].AccessorID })
	sort.Slice(c.drains, func(a, b int) bool { return c.drains[a].Executor < c.drains[b].Executor })
	enc := codec.NewEncoder(w, msgpackHandle)
	if err := enc.Encode(&h); err != nil {
		return fmt.Errorf("snapshot header: %w", err)
	}
	for _, j := range c.jobs {
		if err := enc.Encode(j); err != nil {
			return fmt.Errorf("snapshot job %s: %w", j.ID, err)
		}
	}
	for i := range c.execs {
		if err := enc.Encode(&c.execs[i]); err != nil {
			return fmt.Errorf("snapshot execution %s: %w", c.execs[i].ID, err)
		}
	}
	for i := range c.tombs {
		if err := enc.Encode(&c.tombs[i]); err != nil {
			return fmt.Errorf("snapshot tombstone %s: %w", c.tombs[i].ID, err)
		}
	}
	for i := range c.parts {
		if err := enc.Encode(&c.parts[i]); err != nil {
			return fmt.Errorf("snapshot partition %s: %w", c.parts[i].ID, err)
		}
	}
	for i := range c.tokens {
		if err := enc.Encode(&c.tokens[i]); err != nil {
			return fmt.Errorf("snapshot token %s: %w", c.tokens[i].AccessorID, err)
		}
	}
	for i := range c.drains {
		if err := enc.Encode(&c.drains[i]); err != nil {
			return fmt.Errorf("snapshot drain %s: %w", c.drains[i].Executor, err)
		}
	}
	for i := range c.floors {
		if err := enc.Encode(&c.floors[i]); err != nil {
			return fmt.Errorf("snapshot floor %d: %w", c.floors[i].Bucket, err)
		}
	}
	return nil
}

// Hash is a digest of the state, independent of the applied index: two
// replicas at the same applied index have the same hash.
func (c *Capture) Hash() string {
	h := sha256.New()
	hdr := c.header
	hdr.Index = 0
	bw := bufio.NewWriterSize(h, 64<<10)
	if err := c.encode(bw, hdr); err != nil {
		// Encoding into a hash cannot fail for a valid state.
		panic(err)
	}
	_ = bw.Flush()
	return hex.EncodeToString(h.Sum(nil))
}

// Index is the applied index the capture was taken at.
func (c *Capture) Index() uint64 { return c.header.Index }

// Restore reads a snapshot stream into a new State. It trusts no count in
// the header: memory grows with what actually decodes (RestoreSized).
func Restore(r io.Reader) (*State, error) { return RestoreSized(r, -1) }

// Bounds of a restore that the header's counts cannot move.
const (
	// maxPrealloc bounds how many entries a map or array is sized for in
	// advance from a header count; beyond it they grow as records decode.
	maxPrealloc = 1 << 20
	// restoreChunk is how many executions are decoded into one array:
	// they are allocated a chunk at a time, as they arrive.
	restoreChunk = 1 << 14
)

// readErr remembers the error its reader returned, other than io.EOF: a
// failure to read is told from bytes that are no snapshot.
type readErr struct {
	r   io.Reader
	err error
}

func (e *readErr) Read(p []byte) (int, error) {
	n, err := e.r.Read(p)
	if err != nil && err != io.EOF && e.err == nil {
		e.err = err
	}
	return n, err
}

// RestoreSized is Restore of a stream of size bytes (-1: unknown). With a
// size, a header that claims more records than the bytes could hold (each
// takes at least one) is refused before anything is decoded: a 40-byte
// body that claims 1e11 executions is an error, not an allocation.
func RestoreSized(r io.Reader, size int64) (*State, error) {
	s, err := restoreSized(r, size)
	if err != nil && (errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || strings.HasSuffix(err.Error(), ": EOF")) {
		err = fmt.Errorf("the snapshot is cut short (%w)", err)
	}
	return s, err
}

func restoreSized(r io.Reader, size int64) (*State, error) {
	rr := &readErr{r: r}
	br := bufio.NewReaderSize(rr, 256<<10)
	dec := codec.NewDecoder(br, msgpackHandle)
	edec := &execDecoder{r: br}
	var h snapshotHeader
	if err := dec.Decode(&h); err != nil {
		switch {
		case rr.err != nil:
			return nil, fmt.Errorf("reading the snapshot: %w", rr.err) // the reader's, not the bytes'
		case size == 0:
			return nil, errors.New("not a jobmaster snapshot: it is empty")
		case errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || strings.HasSuffix(err.Error(), ": EOF"):
			return nil, fmt.Errorf("snapshot header: %w", err) // cut short (RestoreSized)
		}
		return nil, errors.New("not a jobmaster snapshot: its first bytes are not a snapshot's header")
	}
	if h.Format < 1 || h.Format > snapshotFormat {
		return nil, fmt.Errorf("snapshot format %d, this version reads 1 to %d", h.Format, snapshotFormat)
	}
	if err := h.checkCounts(size); err != nil {
		return nil, err
	}
	s := NewState()
	s.index, s.epoch, s.leader, s.cluster, s.restoring = h.Index, h.Epoch, h.Leader, h.Cluster, h.Restoring
	s.aclBootstrap = h.ACLBootstrap
	s.jobs = make(map[string]*Job, min(h.Jobs, maxPrealloc))
	s.execs = make(map[string]*Execution, min(h.Execs, maxPrealloc))
	for i := 0; i < h.Jobs; i++ {
		j := &Job{}
		if err := dec.Decode(j); err != nil {
			return nil, fmt.Errorf("snapshot job %d: %w", i, err)
		}
		s.jobs[j.ID] = j
	}
	var chunks [][]Execution
	for done := 0; done < h.Execs; {
		chunk := make([]Execution, min(h.Execs-done, restoreChunk))
		for i := range chunk {
			e := &chunk[i]
			if err := edec.decodeExecution(e); err != nil {
				return nil, fmt.Errorf("snapshot execution %d: %w", done+i, err)
			}
			s.execs[e.ID] = e
		}
		chunks = append(chunks, chunk)
		done += len(chunk)
	}
	for i := 0; i < h.Tombstones; i++ {
		var t Tombstone
		if err := dec.Decode(&t); err != nil {
			return nil, fmt.Errorf("snapshot tombstone %d: %w", i, err)
		}
		s.forgotten[t.ID] = t
	}
	for i := 0; i < h.Partitions; i++ {
		p := &Partition{}
		if err := dec.Decode(p); err != nil {
			return nil, fmt.Errorf("snapshot partition %d: %w", i, err)
		}
		s.partitions[p.ID] = p
	}
	for i := 0; i < h.Tokens; i++ {
		t := &ACLToken{}
		if err := dec.Decode(t); err != nil {
			return nil, fmt.Errorf("snapshot token %d: %w", i, err)
		}
		if err := CheckToken(*t); err != nil {
			return nil, fmt.Errorf("snapshot token %d: %w", i, err)
		}
		s.tokens[t.AccessorID] = t
	}
	for i := 0; i < h.Drains; i++ {
		d := &Drain{}
		if err := dec.Decode(d); err != nil {
			return nil, fmt.Errorf("snapshot drain %d: %w", i, err)
		}
		if d.Executor == "" {
			return nil, fmt.Errorf("snapshot drain %d names no executor", i)
		}
		s.drains[d.Executor] = d
	}
	for i := 0; i < h.Floors; i++ {
		var f Floor
		if err := dec.Decode(&f); err != nil {
			return nil, fmt.Errorf("snapshot floor %d: %w", i, err)
		}
		if f.Bucket < 0 || f.Bucket >= floorBuckets || f.Next < 0 {
			return nil, fmt.Errorf("snapshot floor %d: bucket %d, next %d out of range", i, f.Bucket, f.Next)
		}
		s.floors[f.Bucket] = f.Next
	}
	// Nothing follows the last record: bytes after it (a message printed
	// into a backup, two files joined) mean this is not the file saved.
	if _, err := br.ReadByte(); err == nil {
		return nil, fmt.Errorf("snapshot: bytes follow its last record: not one whole snapshot as saved")
	} else if err != io.EOF {
		return nil, fmt.Errorf("snapshot: %w", err)
	}
	if err := s.rebuildDerived(pointers(chunks)); err != nil {
		return nil, err
	}
	if len(s.tokenByHash) != len(s.tokens) {
		return nil, fmt.Errorf("snapshot: two tokens share a secret")
	}
	return s, nil
}

// checkCounts refuses a header whose counts are negative or, for a stream
// of size bytes (size >= 0), could not fit in it.
func (h *snapshotHeader) checkCounts(size int64) error {
	counts := []struct {
		name string
		n    int
	}{{"jobs", h.Jobs}, {"executions", h.Execs}, {"tombstones", h.Tombstones}, {"partitions", h.Partitions}, {"tokens", h.Tokens}, {"drains", h.Drains}, {"floors", h.Floors}}
	var total int64
	for _, c := range counts {
		if c.n < 0 {
			return fmt.Errorf("snapshot header: %d %s", c.n, c.name)
		}
		total += int64(c.n)
		if size >= 0 && (int64(c.n) > size || total > size) {
			return fmt.Errorf("snapshot header: it claims %d %s (%d records in all), more than its %d bytes can hold", c.n, c.name, total, size)
		}
	}
	return nil
}

// pointers yields a pointer to each element of the chunks, in order.
func pointers(chunks [][]Execution) iter.Seq[*Execution] {
	return func(yield func(*Execution) bool) {
		for _, xs := range chunks {
			for i := range xs {
				if !yield(&xs[i]) {
					return
				}
			}
		}
	}
}

// rebuildDerived recomputes the indexes from jobs and the executions execs
// yields (nil: every execution of the state). The maps are sized first:
// with a million executions, growing them dominates a restore. Restore
// passes its decoded array, which iterates far faster than the map, and
// executions stored together mostly share a job, which is looked up once.
func (s *State) rebuildDerived(execs iter.Seq[*Execution]) error {
	if execs == nil {
		execs = maps.Values(s.execs)
	}
	s.resetDerived()
	s.specBytes = 0
	for _, j := range s.jobs {
		s.specBytes += j.Spec.Footprint()
	}
	perExecutor := make(map[string]int)
	placed := 0
	var j *Job
	var cur [][]*Execution
	for e := range execs {
		if j == nil || j.ID != e.Job {
			if j = s.jobs[e.Job]; j != nil {
				cur = s.currentOf(j)
			}
		}
		if j == nil || e.VertexIndex < 0 || e.VertexIndex >= len(j.Vertices) || e.VertexIndex >= len(j.Spec.Vertices) {
			return fmt.Errorf("snapshot: execution %s has no job vertex", e.ID)
		}
		if att := j.Vertices[e.VertexIndex].Attempts; e.Subtask >= 0 && e.Subtask < len(att) && att[e.Subtask] == e.Attempt {
			cur[e.VertexIndex][e.Subtask] = e
		}
		if e.State.Terminal() {
			continue
		}
		s.live[regionOf(j, e)]++
		if e.Executor != "" && e.State != wire.StateScheduled {
			perExecutor[e.Executor]++
			placed++
		}
	}
	for ex, n := range perExecutor {
		s.byExecutor[ex] = make(execSet, n)
		s.slots[ex] = make(map[int]slotUse, n)
	}
	// Index order does not matter here: the indexes are sets and counts.
	for e := range execs {
		if e.Executor == "" || e.State.Terminal() || e.State == wire.StateScheduled {
			continue
		}
		if j == nil || j.ID != e.Job {
			j = s.jobs[e.Job]
		}
		s.track(e, s.keyOf(j, e))
		if e.State == wire.StateCanceling {
			if s.canceling[e.Executor] == nil {
				s.canceling[e.Executor] = make(map[string]struct{})
			}
			s.canceling[e.Executor][e.ID] = struct{}{}
		}
	}
	for _, p := range s.partitions {
		if j := s.jobs[p.Job]; j == nil || p.VertexIndex < 0 || p.VertexIndex >= len(j.Vertices) || p.Subtask < 0 || p.Subtask >= len(j.Vertices[p.VertexIndex].Attempts) {
			return fmt.Errorf("snapshot: partition %s has no job subtask", p.ID)
		}
		s.indexPartition(p)
	}
	for _, j := range s.jobs {
		for ri, r := range j.Regions {
			switch r.Status {
			case RegionReady:
				s.ready.add(regionRef{j.ID, ri}, j.SubmitIndex)
				s.noteJoinable(j.ID)
			case RegionRestarting:
				s.restarting[regionRef{j.ID, ri}] = struct{}{}
			}
		}
	}
	return nil
}

type countingWriter struct {
	w io.Writer
	n int64
}

func (c *countingWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}
