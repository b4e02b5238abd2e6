package partition

import (
	"bytes"
	"os"
	"path/filepath"

	"jobmaster/wire"
)

// A running producer's pipelined output must only grow. A stream checks
// that within one answer; across answers (a consumer's fetch resumes after
// its connection broke, and the resumed answer opens the file by its name
// again) the store remembers, for each file streamed, the file first
// opened, how far streams of it went and the bytes just before that, so
// that a file replaced, cut short, or cut and written again between two
// answers is a broken stream rather than bytes of two files spliced
// together. A partition whose files are not what was streamed of them
// answers every later fetch of those files as broken too.

// tailLen is how many bytes before the furthest point served are kept to
// compare when a stream resumes there.
const tailLen = 64

// streamed is what streams have taken of one file of a running producer.
type streamed struct {
	file os.FileInfo // as first opened for a stream that sent from it
	// begun: a stream began sending bytes of it (served is noted only as
	// each send returns, which may be long after).
	begun  bool
	served int64 // the furthest byte sent, noted
	// sent bounds what streams may have sent: the size of the file as each
	// send from it began. A file shorter than that was cut short.
	sent int64
	tail []byte // the bytes before served (at most tailLen)
	// broken: why a stream found the file changed (wire.EndReplaced,
	// wire.EndShrank); every later answer, and the partition, say so.
	broken string
}

// markBroken records that file key of lv was found changed (why).
func (s *Store) markBroken(lv *live, key, why string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if lv.files == nil {
		lv.files = map[string]*streamed{}
	}
	rec := lv.files[key]
	if rec == nil {
		rec = &streamed{}
		lv.files[key] = rec
	}
	if rec.broken == "" {
		rec.broken = why
	}
}

// checkStreamed is the check of file key (consumer/index) of lv opened for
// a stream: "" if it is the file streams of it had, at least as long as
// they went and with the bytes they sent there, else why not
// (wire.EndReplaced, wire.EndShrank). Until a stream has begun sending from
// a file, the file opened last is the one (nothing of another can be
// spliced).
func (s *Store) checkStreamed(lv *live, key string, f *os.File) string {
	first, err := f.Stat()
	if err != nil {
		return wire.EndReplaced
	}
	s.mu.Lock()
	rec := lv.files[key]
	if rec == nil {
		if lv.files == nil {
			lv.files = map[string]*streamed{}
		}
		lv.files[key] = &streamed{file: first}
		s.mu.Unlock()
		return ""
	}
	if rec.broken != "" {
		s.mu.Unlock()
		return rec.broken
	}
	if !rec.begun {
		rec.file = first
		s.mu.Unlock()
		return ""
	}
	r := *rec
	s.mu.Unlock()
	// The size is read after the record: another stream may take the
	// record further meanwhile, and a size read before would look short
	// of it.
	fi, err := f.Stat()
	if err != nil {
		return wire.EndReplaced
	}
	return compareStreamed(r.file, r.served, r.tail, f, fi)
}

// beginStreamed records that a stream is about to send bytes of file key
// of lv from the file fi describes: from now on it is the file. If a stream
// has begun sending from another file already (the producer replaced it
// between), it is not sent from: wire.EndReplaced.
func (s *Store) beginStreamed(lv *live, key string, fi os.FileInfo) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	rec := lv.files[key]
	switch {
	case rec != nil && rec.broken != "":
		return rec.broken
	case rec == nil:
		if lv.files == nil {
			lv.files = map[string]*streamed{}
		}
		lv.files[key] = &streamed{file: fi, begun: true, sent: fi.Size()}
	case rec.begun && !os.SameFile(rec.file, fi):
		return wire.EndReplaced
	default:
		rec.file, rec.begun = fi, true
		rec.sent = max(rec.sent, fi.Size())
	}
	return ""
}

// cutShort reports whether file key of lv, whose stat is fi, is shorter
// than what streams may have sent of it: the producer cut it short. A
// fetch asking for an offset past the file's end proves nothing by itself
// (the offset is the fetcher's word), so only this marks the file broken.
func (s *Store) cutShort(lv *live, key string, fi os.FileInfo) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	rec := lv.files[key]
	return rec != nil && rec.begun && os.SameFile(rec.file, fi) && fi.Size() < rec.sent
}

// compareStreamed compares f (whose stat is fi) with what was streamed of
// a file: file, served bytes, their tail.
func compareStreamed(file os.FileInfo, served int64, tail []byte, f *os.File, fi os.FileInfo) string {
	if !os.SameFile(file, fi) {
		return wire.EndReplaced
	}
	if fi.Size() < served {
		return wire.EndShrank
	}
	if len(tail) > 0 {
		got := make([]byte, len(tail))
		if n, _ := f.ReadAt(got, served-int64(len(tail))); n != len(got) || !bytes.Equal(got, tail) {
			return wire.EndShrank // cut short, then written again
		}
	}
	return ""
}

// noteServed records that a stream of file key of lv (f, which fi
// describes) went to off.
func (s *Store) noteServed(lv *live, key string, f *os.File, fi os.FileInfo, off int64) {
	s.mu.Lock()
	rec := lv.files[key]
	if rec == nil || rec.broken != "" || off <= rec.served || !os.SameFile(rec.file, fi) {
		s.mu.Unlock()
		return
	}
	s.mu.Unlock()
	n := min(off, tailLen)
	tail := make([]byte, n)
	if m, _ := f.ReadAt(tail, off-n); int64(m) != n {
		return
	}
	s.mu.Lock()
	if off > rec.served {
		rec.served, rec.tail = off, tail
	}
	s.mu.Unlock()
}

// brokenFiles is, for a producer that FINISHED, the files streams took of
// it whose final form (under data, the partition's data directory) is not
// what they were streaming: by key, why.
func (s *Store) brokenFiles(lv *live, data string) map[string]string {
	s.mu.Lock()
	recs := make(map[string]streamed, len(lv.files))
	for k, r := range lv.files {
		recs[k] = *r
	}
	s.mu.Unlock()
	var out map[string]string
	for key, r := range recs {
		if r.broken != "" {
			if out == nil {
				out = map[string]string{}
			}
			out[key] = r.broken
			continue
		}
		if !r.begun {
			continue // nothing of it was sent: nothing to splice
		}
		why := ""
		f, err := os.Open(filepath.Join(data, filepath.FromSlash(key)))
		if err != nil {
			why = wire.EndShrank
		} else {
			if fi, err := f.Stat(); err != nil {
				why = wire.EndReplaced
			} else {
				why = compareStreamed(r.file, r.served, r.tail, f, fi)
			}
			f.Close()
		}
		if why != "" {
			if out == nil {
				out = map[string]string{}
			}
			out[key] = why
		}
	}
	return out
}
