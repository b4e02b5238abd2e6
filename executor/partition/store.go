package partition

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"jobmaster/internal/forceremove"
	"jobmaster/wire"
)

// On-disk names under the store's directory.
const (
	// staging holds outputs on their way in and partitions on their way
	// out. Its name has a character no execution id component has, so no
	// job can be called that.
	staging  = "~staging"
	metaFile = "meta.json"
	dataDir  = "data"
	// maxMeta bounds a metadata file read back (a thousand outputs fit).
	maxMeta = 1 << 20
	// maxTombstones bounds how many producers that ended without
	// finishing are remembered, so that a stream of theirs ends at once.
	maxTombstones = 4096
	// discardGrace is how long a stream of a discarded producer that its
	// reader holds up in a write may go on before it is cut.
	discardGrace = 2 * time.Second
)

// Meta describes one producer execution's output: the metadata file of a
// partition, and what the store knows of a producer that still runs.
type Meta struct {
	ID      string        `json:"id"`
	JobID   string        `json:"job_id"`
	Vertex  string        `json:"vertex"`
	Subtask int           `json:"subtask"`
	Attempt int           `json:"attempt"`
	Outputs []wire.Output `json:"outputs"`
	// Bytes is the partition's size: the sum of the files that count.
	Bytes int64 `json:"bytes"`
	// Broken are the files of a partition that streams took while its
	// producer ran and that are not what they streamed (replaced, cut
	// short): by "<consumer>/<index>", why (wire.EndReplaced,
	// wire.EndShrank). They are answered as broken streams, by an executor
	// started again too.
	Broken map[string]string `json:"broken,omitempty"`
}

func (m Meta) partition() wire.Partition {
	return wire.Partition{ID: m.ID, JobID: m.JobID, Vertex: m.Vertex, Subtask: m.Subtask, Attempt: m.Attempt, Bytes: m.Bytes}
}

// held is a partition: a FINISHED producer's output.
type held struct {
	meta Meta
	// dir holds meta.json and data/; "" for a partition kept in memory
	// only (a simulated producer's, which has no bytes).
	dir string
	// sizes are the sizes of its files that are not empty, by
	// "<consumer>/<index>", as they were kept: a file served must still
	// have its size (a file changed or deleted behind the executor's back
	// is not served as the partition).
	sizes map[string]int64
	// gone is signalled once the store no longer holds it (released,
	// discarded, gone from disk): streams of it end. A producer's
	// partition has its live entry's signal, which streams that followed
	// it while it ran wait on too.
	gone *dropSignal
}

// newHeld is a partition; gone is its producer's signal, nil for a new one.
func newHeld(m Meta, dir string, sizes map[string]int64, gone *dropSignal) *held {
	if gone == nil {
		gone = newDropSignal()
	}
	return &held{meta: m, dir: dir, sizes: sizes, gone: gone}
}

// dropSignal is closed, once, when what it belongs to is dropped.
type dropSignal struct {
	ch   chan struct{}
	once sync.Once
}

func newDropSignal() *dropSignal { return &dropSignal{ch: make(chan struct{})} }

// fire closes the signal; later calls do nothing.
func (d *dropSignal) fire() { d.once.Do(func() { close(d.ch) }) }

// drop ends the streams of h: the store no longer holds it.
func (h *held) drop() { h.gone.fire() }

// live is a producer that runs: its output may be streamed (pipelined
// outputs) but is not a partition yet.
type live struct {
	meta Meta
	out  string // the output directory the task writes; "" if none
	// ended is closed once the producer's end is settled: complete tells
	// whether it left a partition (read under the store's lock, or after
	// ended is closed).
	ended chan struct{}
	// failed is closed when it ends without a partition: streams of it
	// stop sending and end failed.
	failed   chan struct{}
	complete bool
	// gone is the signal its partition will have (held.gone): a stream
	// that followed the producer and goes on after it FINISHED ends when
	// the partition is dropped.
	gone *dropSignal
	// files are what streams took of its files (checkStreamed), under the
	// store's lock.
	files map[string]*streamed
}

// Store keeps the partitions an executor holds, under one directory:
//
//	<dir>/<job>/<vertex>/<subtask>/<attempt>/meta.json   Meta as JSON
//	<dir>/<job>/<vertex>/<subtask>/<attempt>/data/<C>/<j> what subtask j of C reads
//	<dir>/~staging/                                      outputs moving in, partitions moving out
//
// An output becomes a partition in staging (moved there from the task's
// execution directory, cleaned of everything that does not count, given
// its metadata) and then takes its place with one rename, so a partition
// on disk is always whole. Directories are created 0700.
type Store struct {
	dir string
	log *slog.Logger

	mu        sync.Mutex
	held      map[string]*held
	live      map[string]*live
	failed    map[string]struct{}
	failedFIF []string
	closed    chan struct{}
	closeOnce sync.Once
}

// Open opens the store in dir (created if missing) and finds the
// partitions a previous run left there. A partition found damaged (see
// CheckLoaded) is deleted; so is whatever was left in staging.
func Open(dir string, log *slog.Logger) (*Store, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("partitions: %w", err)
	}
	if err := forceremove.All(filepath.Join(dir, staging)); err != nil {
		return nil, fmt.Errorf("partitions: clear staging: %w", err)
	}
	if err := os.Mkdir(filepath.Join(dir, staging), 0o700); err != nil {
		return nil, fmt.Errorf("partitions: %w", err)
	}
	s := &Store{dir: dir, log: log, held: make(map[string]*held), live: make(map[string]*live),
		failed: make(map[string]struct{}), closed: make(chan struct{})}
	if err := s.load(); err != nil {
		return nil, err
	}
	return s, nil
}

// load walks <dir>/<job>/<vertex>/<subtask>/<attempt>/.
func (s *Store) load() error {
	var walk func(rel []string) error
	walk = func(rel []string) error {
		dir := filepath.Join(append([]string{s.dir}, rel...)...)
		ents, err := os.ReadDir(dir)
		if err != nil {
			return fmt.Errorf("partitions: %w", err)
		}
		for _, ent := range ents {
			if len(rel) == 0 && ent.Name() == staging {
				continue
			}
			next := append(append([]string(nil), rel...), ent.Name())
			p := filepath.Join(dir, ent.Name())
			if !ent.IsDir() {
				s.log.Warn("removing a stray file among the partitions", "path", p)
				_ = forceremove.All(p)
				continue
			}
			if len(next) < 4 {
				if err := walk(next); err != nil {
					return err
				}
				removeIfEmpty(p)
				continue
			}
			id := strings.Join(next, "/")
			m, sizes, err := s.loadOne(p, id)
			if err != nil {
				s.log.Warn("removing a damaged partition", "execution", id, "err", err)
				_ = forceremove.All(p)
				continue
			}
			s.held[id] = newHeld(m, p, sizes, nil)
		}
		return nil
	}
	if err := walk(nil); err != nil {
		return err
	}
	if len(s.held) > 0 {
		s.log.Info("partitions found on disk", "partitions", len(s.held))
	}
	return nil
}

func (s *Store) loadOne(dir, id string) (Meta, map[string]int64, error) {
	f, err := os.Open(filepath.Join(dir, metaFile))
	if err != nil {
		return Meta{}, nil, err
	}
	defer f.Close()
	var m Meta
	if err := json.NewDecoder(io.LimitReader(f, maxMeta)).Decode(&m); err != nil {
		return Meta{}, nil, fmt.Errorf("metadata: %w", err)
	}
	bytes, sizes, _, err := scan(filepath.Join(dir, dataDir), m.Outputs, m.Subtask, false)
	if err != nil {
		return Meta{}, nil, err
	}
	if ok, why := CheckLoaded(m, id, bytes); !ok {
		return Meta{}, nil, errors.New(why)
	}
	for key, why := range m.Broken {
		// Only what commitFiles writes: a file of the partition, a code.
		c, i, ok := strings.Cut(key, "/")
		n, err := strconv.Atoi(i)
		if !ok || err != nil || strconv.Itoa(n) != i || !Wanted(m.Outputs, m.Subtask, c, n) || (why != wire.EndShrank && why != wire.EndReplaced) {
			return Meta{}, nil, fmt.Errorf("metadata: broken file %.64q (%.16q) is not one of its files and a known reason", key, why)
		}
	}
	return m, sizes, nil
}

// removeIfEmpty removes dir if it is an empty directory.
func removeIfEmpty(dir string) { _ = os.Remove(dir) }

// scan sums the sizes of the files of an output directory that count, and
// returns the size of each that is not empty (by "<consumer>/<index>");
// if clean, it removes every other entry (see Keep), and returns those of
// them named as data but not of its type (a symbolic link or a directory
// named "count/0", a symbolic link named "count"): a consumer reads them
// as empty, which its producer most likely did not mean. A missing
// directory is an empty output.
func scan(dir string, outputs []wire.Output, subtask int, clean bool) (total int64, sizes map[string]int64, notData []string, err error) {
	ents, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return 0, nil, nil, nil
	}
	if err != nil {
		return 0, nil, nil, err
	}
	for _, ent := range ents {
		p := filepath.Join(dir, ent.Name())
		if !Keep(outputs, subtask, "", ent.Name(), ent.Type()) {
			if clean {
				if _, consumer := output(outputs, ent.Name()); consumer && len(notData) < maxNotData {
					notData = append(notData, ent.Name())
				}
				if err := forceremove.All(p); err != nil {
					return 0, nil, nil, err
				}
			}
			continue
		}
		files, err := os.ReadDir(p)
		if err != nil {
			return 0, nil, nil, err
		}
		for _, f := range files {
			fp := filepath.Join(p, f.Name())
			if !Keep(outputs, subtask, ent.Name(), f.Name(), f.Type()) {
				if clean {
					if Counts(outputs, subtask, ent.Name(), f.Name()) && len(notData) < maxNotData {
						notData = append(notData, ent.Name()+"/"+f.Name())
					}
					if err := forceremove.All(fp); err != nil {
						return 0, nil, nil, err
					}
				}
				continue
			}
			fi, err := f.Info()
			if err != nil {
				return 0, nil, nil, err
			}
			if fi.Size() > 0 {
				if sizes == nil {
					sizes = map[string]int64{}
				}
				sizes[ent.Name()+"/"+f.Name()] = fi.Size()
			}
			total += fi.Size()
		}
	}
	return total, sizes, notData, nil
}

// maxNotData bounds the entries scan names as not data.
const maxNotData = 8

// path is the directory of partition id (a valid execution id).
func (s *Store) path(id string) string { return filepath.Join(s.dir, filepath.FromSlash(id)) }

// stage makes a fresh directory in staging.
func (s *Store) stage() (string, error) {
	var b [8]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", err
	}
	dir := filepath.Join(s.dir, staging, hex.EncodeToString(b[:]))
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", err
	}
	return dir, nil
}

// Begin registers a producer that is about to run, writing into out ("":
// it writes nothing, as a simulated task). From now on its pipelined
// outputs may be streamed. A partition of the same id (a job id used again
// after it was forgotten) is released first.
func (s *Store) Begin(m Meta, out string) {
	s.Release([]string{m.ID})
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.failed, m.ID)
	s.live[m.ID] = &live{meta: m, out: out, ended: make(chan struct{}), failed: make(chan struct{}), gone: newDropSignal()}
}

// Live reports whether id is a registered producer that has not ended.
func (s *Store) Live(id string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, ok := s.live[id]
	return ok
}

// Commit makes the output of producer id, which FINISHED, a partition and
// returns its size. On an error (the disk is full, say) the output is
// deleted and the producer must not count as FINISHED.
func (s *Store) Commit(id string) (int64, error) {
	s.mu.Lock()
	lv := s.live[id]
	s.mu.Unlock()
	if lv == nil {
		return 0, fmt.Errorf("no output of %s to keep", id)
	}
	if lv.out == "" {
		s.settle(lv, newHeld(lv.meta, "", nil, lv.gone))
		return 0, nil
	}
	h, err := s.commitFiles(lv)
	if err != nil {
		s.settle(lv, nil)
		return 0, err
	}
	return h.meta.Bytes, nil
}

// commitFiles moves lv's output into the store and settles lv.
func (s *Store) commitFiles(lv *live) (*held, error) {
	st, err := s.stage()
	if err != nil {
		_ = forceremove.All(lv.out)
		return nil, fmt.Errorf("keeping the output: %w", err)
	}
	fail := func(err error) (*held, error) {
		_ = forceremove.All(st)
		_ = forceremove.All(lv.out)
		return nil, fmt.Errorf("keeping the output: %w", err)
	}
	data := filepath.Join(st, dataDir)
	// The output directory itself may have been replaced by the task: only
	// a real directory is its output (Lstat: a link is not followed).
	if fi, err := os.Lstat(lv.out); err == nil && fi.IsDir() {
		if err := os.Rename(lv.out, data); err != nil {
			return fail(err)
		}
	} else {
		_ = forceremove.All(lv.out)
		if err := os.Mkdir(data, 0o700); err != nil {
			return fail(err)
		}
	}
	m := lv.meta
	var sizes map[string]int64
	var notData []string
	if m.Bytes, sizes, notData, err = scan(data, m.Outputs, m.Subtask, true); err != nil {
		return fail(err)
	}
	if len(notData) > 0 {
		s.log.Warn("a producer's output has entries named as data that are not regular files (symbolic links, directories, pipes): they were removed, and their consumers read nothing there", "execution", m.ID, "entries", notData)
	}
	if m.Broken = s.brokenFiles(lv, data); len(m.Broken) > 0 {
		s.log.Warn("a producer changed files it was streaming (a pipelined output must only grow): those are answered as broken", "execution", m.ID, "files", m.Broken)
	}
	b, err := json.Marshal(m)
	if err != nil {
		return fail(err)
	}
	if err := writeFile(filepath.Join(st, metaFile), append(b, '\n')); err != nil {
		return fail(err)
	}
	h := newHeld(m, s.path(m.ID), sizes, lv.gone)
	s.mu.Lock()
	err = os.MkdirAll(filepath.Dir(h.dir), 0o700)
	if err == nil {
		err = s.replaceLocked(h.dir, st)
	}
	if err != nil {
		s.mu.Unlock()
		return fail(err)
	}
	s.held[m.ID] = h
	delete(s.live, m.ID)
	lv.complete = true
	close(lv.ended)
	s.mu.Unlock()
	return h, nil
}

// replaceLocked renames dir st to target, moving aside whatever is there
// (a partition of a job id that was forgotten and used again).
func (s *Store) replaceLocked(target, st string) error {
	err := os.Rename(st, target)
	if err == nil || !(errors.Is(err, fs.ErrExist) || errors.Is(err, syscall.ENOTEMPTY)) {
		return err
	}
	old, err := s.stage()
	if err != nil {
		return err
	}
	if err := os.Rename(target, filepath.Join(old, "old")); err != nil {
		return err
	}
	defer forceremove.All(old)
	return os.Rename(st, target)
}

// writeFile writes a new file with data.
func writeFile(path string, data []byte) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// settle ends live producer lv: with a partition h, or (h nil) without one.
func (s *Store) settle(lv *live, h *held) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.live[lv.meta.ID] == lv {
		delete(s.live, lv.meta.ID)
	}
	if h != nil {
		s.held[lv.meta.ID] = h
		lv.complete = true
	} else {
		s.tombstoneLocked(lv.meta.ID)
		close(lv.failed)
		// Its streams end failed at once; one a stalled reader holds up in
		// a write is cut after a grace, so the deleted output's space is
		// freed.
		time.AfterFunc(discardGrace, lv.gone.fire)
	}
	close(lv.ended)
}

func (s *Store) tombstoneLocked(id string) {
	if _, ok := s.failed[id]; ok {
		return
	}
	s.failed[id] = struct{}{}
	s.failedFIF = append(s.failedFIF, id)
	if len(s.failedFIF) > maxTombstones {
		delete(s.failed, s.failedFIF[0])
		s.failedFIF = s.failedFIF[1:]
	}
}

// Discard deletes what producer id left, because it ended without
// FINISHED: its output if it was still running, its partition if it had
// been kept (a cancel came between its exit and its end being recorded).
// Streams of it end as failed.
func (s *Store) Discard(id string) {
	s.mu.Lock()
	lv := s.live[id]
	h := s.held[id]
	delete(s.held, id)
	if h != nil {
		h.drop()
		s.tombstoneLocked(id)
	}
	s.mu.Unlock()
	if lv != nil {
		s.settle(lv, nil)
		if lv.out != "" {
			_ = forceremove.All(lv.out)
		}
	}
	if h != nil {
		s.remove([]*held{h})
	}
}

// Release deletes the partitions among ids, and returns those it held.
// Unknown ids are ignored.
func (s *Store) Release(ids []string) []string {
	s.mu.Lock()
	var gone []*held
	var out []string
	for _, id := range ids {
		if h, ok := s.held[id]; ok {
			delete(s.held, id)
			h.drop()
			gone = append(gone, h)
			out = append(out, id)
		}
	}
	s.mu.Unlock()
	s.remove(gone)
	return out
}

// remove deletes the directories of partitions no longer held: each is
// moved to staging first (so it is gone from its place at once), then
// deleted, and the directories left empty above it are removed.
func (s *Store) remove(gone []*held) {
	for _, h := range gone {
		if h.dir == "" {
			continue
		}
		s.mu.Lock()
		_, err := os.Lstat(h.dir)
		gone := errors.Is(err, fs.ErrNotExist) // deleted behind the store's back
		var trash string
		if !gone {
			if trash, err = s.stage(); err == nil {
				if err = os.Rename(h.dir, filepath.Join(trash, "p")); err != nil {
					removeIfEmpty(trash)
				}
			}
		}
		for d := filepath.Dir(h.dir); d != s.dir && strings.HasPrefix(d, s.dir); d = filepath.Dir(d) {
			removeIfEmpty(d)
		}
		s.mu.Unlock()
		if gone {
			continue
		}
		if err != nil {
			s.log.Warn("moving a released partition aside", "execution", h.meta.ID, "err", err)
			trash = h.dir
		}
		if err := forceremove.All(trash); err != nil {
			s.log.Warn("deleting a released partition", "execution", h.meta.ID, "err", err)
		}
	}
}

// Verify drops the partitions whose files are gone from disk (deleted
// behind the executor's back: a cleanup, a replaced disk), so that the
// next report no longer lists them and the leader learns they are lost,
// and deletes what is left of them.
// It returns the ids it dropped. The files are checked outside the
// store's lock.
func (s *Store) Verify() []string {
	s.mu.Lock()
	check := make(map[string]string, len(s.held))
	for id, h := range s.held {
		if h.dir != "" {
			check[id] = h.dir
		}
	}
	s.mu.Unlock()
	var gone []string
	for id, dir := range check {
		if !present(dir) {
			gone = append(gone, id)
		}
	}
	if len(gone) == 0 {
		return nil
	}
	sort.Strings(gone)
	s.mu.Lock()
	var dropped []string
	var hs []*held
	for _, id := range gone {
		if h, ok := s.held[id]; ok && h.dir == check[id] {
			delete(s.held, id)
			h.drop()
			dropped = append(dropped, id)
			hs = append(hs, h)
		}
	}
	s.mu.Unlock()
	if len(dropped) > 0 {
		s.log.Warn("partitions gone from disk: no longer held", "executions", dropped)
	}
	s.remove(hs) // what is left of them (their metadata, say)
	return dropped
}

// present reports whether a partition directory still has its metadata
// and its data directory.
func present(dir string) bool {
	if _, err := os.Stat(filepath.Join(dir, metaFile)); err != nil {
		return false
	}
	fi, err := os.Stat(filepath.Join(dir, dataDir))
	return err == nil && fi.IsDir()
}

// List returns every partition held, sorted by id (never nil).
func (s *Store) List() []wire.Partition {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]wire.Partition, 0, len(s.held))
	for _, h := range s.held {
		out = append(out, h.meta.partition())
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

// Lookup returns the partitions among ids that are held, in ids' order.
func (s *Store) Lookup(ids []string) []wire.Partition {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []wire.Partition
	for _, id := range ids {
		if h, ok := s.held[id]; ok {
			out = append(out, h.meta.partition())
		}
	}
	return out
}

// Close ends every stream being served. The partitions stay on disk.
func (s *Store) Close() { s.closeOnce.Do(func() { close(s.closed) }) }
