package integration

import (
	"fmt"
	"sort"
	"strings"
	"time"
)

// The replica half of the checker: whether the masters hold the same
// state, and when they do not, which of two cases it is.
//
//   - BEHIND: a replica that is only slower. Its applied index is lower
//     than the others', and wherever its state was read at an index
//     another master was also read at, the hashes were equal: the same
//     log prefix, not yet all applied. It is a liveness matter (it did not
//     catch up within the wait), not a divergence.
//   - APART: a replica with a different state at the same applied index.
//     The FSM is deterministic, so two masters that applied the same log
//     prefix have the same hash at every index; equal indexes with
//     different hashes mean the replicas applied different logs, or one of
//     them applied the same log differently. This is a safety violation.
//
// Hashes are only ever compared at equal applied indexes, whenever they
// were read: during the run (the hash monitor) and at the end, after
// waiting for every master to reach the leader's applied index.

// HashSample is one reading of GET /v1/state/hash on one master: its
// applied index and the hash of its own state at that index.
type HashSample struct {
	Node    string
	Applied uint64
	Hash    string
	At      int64 // unix ns
}

// Convergence is the end of the run's wait for equal applied indexes.
type Convergence struct {
	// Leader is the master that led when the wait began ("" if none), and
	// Target the applied index the wait aimed at: the highest applied index
	// any master showed (at least the leader's).
	Leader string
	Target uint64
	// Final holds each master's last reading (a master missing from it
	// could not be read).
	Final []HashSample
	// Reached says every master reached Target; Waited is how long it took
	// (or the bound, if not).
	Reached bool
	Waited  time.Duration
}

// ReplicaCase names how a master's state relates to the others'.
type ReplicaCase string

// The cases.
const (
	ReplicaAgrees ReplicaCase = "AGREES"
	ReplicaBehind ReplicaCase = "BEHIND"
	ReplicaApart  ReplicaCase = "APART"
	ReplicaUnread ReplicaCase = "UNREAD"
)

// ReplicaVerdict is one master's case with its evidence.
type ReplicaVerdict struct {
	Node string
	Case ReplicaCase
	// Final is the master's last reading (zero if unread).
	Final HashSample
	// ApartAt is, for APART, the lowest applied index at which this
	// master's hash differed from another's, and Others the other masters'
	// hashes there.
	ApartAt   uint64
	ApartSeen int64 // when the first differing reading was taken (unix ns)
	Others    map[string]string
	// Compared counts the applied indexes at which this master's hash
	// was compared with another's (the evidence for AGREES and BEHIND).
	Compared int
	Detail   string
}

// judgeReplicas gives every master of masters its case, from every hash
// sample taken (during the run and at the end) and the final convergence.
func judgeReplicas(masters []string, samples []HashSample, conv Convergence) []ReplicaVerdict {
	all := append(append([]HashSample(nil), samples...), conv.Final...)
	sort.SliceStable(all, func(i, j int) bool { return all[i].At < all[j].At })
	// byNode[node][index] is the first reading of that index. A second
	// reading of the same index must agree with it, or the master changed
	// its own past: also APART.
	byNode := map[string]map[uint64]HashSample{}
	selfApart := map[string]string{}
	selfAt := map[string]HashSample{}
	for _, s := range all {
		m := byNode[s.Node]
		if m == nil {
			m = map[uint64]HashSample{}
			byNode[s.Node] = m
		}
		if r, ok := m[s.Applied]; ok {
			if r.Hash != s.Hash && selfApart[s.Node] == "" {
				selfApart[s.Node] = fmt.Sprintf("its own hash at applied index %d changed from %s to %s", s.Applied, short(r.Hash), short(s.Hash))
				selfAt[s.Node] = s
			}
			continue
		}
		m[s.Applied] = s
	}
	// For each master, the lowest index at which it is the odd one out (its
	// hash differs from another's and fewer than half of the masters read
	// there hold it), and the lowest at which it is in a tie (two readers,
	// or no hash with a majority).
	type odd struct {
		minority, tie uint64
		compared      int
	}
	odds := map[string]*odd{}
	anyMinority := false
	for _, node := range masters {
		o := &odd{}
		odds[node] = o
		mine := byNode[node]
		var idxs []uint64
		for i := range mine {
			idxs = append(idxs, i)
		}
		sort.Slice(idxs, func(a, b int) bool { return idxs[a] < idxs[b] })
		for _, i := range idxs {
			readers, same := 1, 1
			for _, other := range masters {
				if r, ok := byNode[other][i]; ok && other != node {
					readers++
					if r.Hash == mine[i].Hash {
						same++
					}
				}
			}
			if readers == 1 {
				continue
			}
			o.compared++
			switch {
			case same == readers || same*2 > readers:
			case same*2 < readers:
				if o.minority == 0 {
					o.minority = i
				}
				anyMinority = true
			case o.tie == 0:
				o.tie = i
			}
		}
	}
	final := map[string]HashSample{}
	for _, s := range conv.Final {
		final[s.Node] = s
	}
	var out []ReplicaVerdict
	for _, node := range masters {
		o := odds[node]
		v := ReplicaVerdict{Node: node, Final: final[node], Compared: o.compared}
		// A tie names no odd one; when some master is in a minority
		// somewhere, that one is the odd one and the tie is its doing. The
		// odd one is apart from the first index it was seen differing at.
		at := o.minority
		if o.tie != 0 && (at != 0 && o.tie < at || at == 0 && !anyMinority) {
			at = o.tie
		}
		switch {
		case selfApart[node] != "":
			v.Case, v.Detail = ReplicaApart, selfApart[node]
			v.ApartAt, v.ApartSeen = selfAt[node].Applied, selfAt[node].At
		case at != 0:
			v.Case, v.ApartAt, v.Others = ReplicaApart, at, map[string]string{}
			mine := byNode[node][at]
			v.ApartSeen = mine.At
			var parts []string
			for _, other := range masters {
				if r, ok := byNode[other][at]; ok && other != node {
					v.Others[other] = r.Hash
					parts = append(parts, fmt.Sprintf("%s has %s", other, short(r.Hash)))
					v.ApartSeen = max(v.ApartSeen, r.At) // seen apart once both were read
				}
			}
			v.Detail = fmt.Sprintf("at applied index %d has hash %s, while %s", at, short(mine.Hash), strings.Join(parts, " and "))
		case v.Final.Node == "":
			v.Case, v.Detail = ReplicaUnread, "could not be read at the end"
		case v.Final.Applied < conv.Target:
			v.Case = ReplicaBehind
			v.Detail = fmt.Sprintf("is at applied index %d, below the target %d, after a wait of %s; at each of the %d indexes it was read at together with another master, their hashes were equal",
				v.Final.Applied, conv.Target, conv.Waited.Round(time.Millisecond), v.Compared)
		default:
			v.Case = ReplicaAgrees
			v.Detail = fmt.Sprintf("reached applied index %d; at each of the %d indexes it was read at together with another master, their hashes were equal", v.Final.Applied, v.Compared)
		}
		out = append(out, v)
	}
	return out
}

// finalsLine is every master's final applied index and hash, for the
// violation texts ("m1 1200 3fa2c9d01b7e, m2 1234 ...").
func finalsLine(vs []ReplicaVerdict) string {
	var parts []string
	for _, v := range vs {
		if v.Final.Node == "" {
			parts = append(parts, v.Node+" unread")
			continue
		}
		parts = append(parts, fmt.Sprintf("%s %d %s", v.Node, v.Final.Applied, short(v.Final.Hash)))
	}
	return strings.Join(parts, ", ")
}

// short is the first 12 hex digits of a hash.
func short(h string) string {
	if len(h) > 12 {
		return h[:12]
	}
	return h
}

// checkReplicas is same-state-hash: every master reached the target index
// with the same hash. Each violation names its case.
func checkReplicas(in CheckInput, props map[string]*PropertyResult, fail failFunc) []ReplicaVerdict {
	// The job lists were read after the wait, each at a stable applied
	// index with its hash: they are readings too, and the latest ones.
	var names []string
	conv := in.Convergence
	finals := map[string]HashSample{}
	for _, s := range conv.Final {
		finals[s.Node] = s
	}
	samples := append([]HashSample(nil), in.HashSamples...)
	for _, m := range in.Masters {
		names = append(names, m.ID)
		if m.Err == "" && m.Hash != "" {
			s := HashSample{Node: m.ID, Applied: m.Applied, Hash: m.Hash, At: m.At}
			samples = append(samples, s)
			finals[m.ID] = s
		}
	}
	conv.Final = nil
	for _, n := range names {
		if s, ok := finals[n]; ok {
			conv.Final = append(conv.Final, s)
			conv.Target = max(conv.Target, s.Applied)
		}
	}
	vs := judgeReplicas(names, samples, conv)
	p := props[PropSameHash]
	line := finalsLine(vs)
	for _, v := range vs {
		p.Checked++
		switch v.Case {
		case ReplicaApart:
			seen := ""
			if v.ApartSeen != 0 {
				seen = " (first seen " + time.Unix(0, v.ApartSeen).UTC().Format("15:04:05.000") + ")"
			}
			fail(PropSameHash, "APART: master %s %s%s; at the end (applied index, hash): %s", v.Node, v.Detail, seen, line)
		case ReplicaBehind:
			fail(PropSameHash, "BEHIND: master %s %s; at the end (applied index, hash): %s", v.Node, v.Detail, line)
		case ReplicaUnread:
			fail(PropSameHash, "UNREAD: master %s %s; at the end (applied index, hash): %s", v.Node, v.Detail, line)
		}
	}
	// Equal hashes at equal indexes also mean equal job lists; a
	// difference there is reported with the lists' own indexes.
	for i := range in.Masters {
		for k := i + 1; k < len(in.Masters); k++ {
			a, b := in.Masters[i], in.Masters[k]
			if a.Err != "" || b.Err != "" || a.Applied != b.Applied {
				continue
			}
			if diff := jobListDiff(a.Jobs, b.Jobs); diff != "" {
				fail(PropSameHash, "APART: masters %s and %s list different jobs at the same applied index %d: %s", a.ID, b.ID, a.Applied, diff)
			}
		}
	}
	return vs
}

// missingVerdict says why master m lacks a job that others list: BEHIND
// if it read its list at a lower applied index than a master that lists
// the job, APART if at an equal or higher one (jobs are forgotten only
// after the retention, far beyond a run, so a job once listed stays).
func missingVerdict(m MasterSnapshot, job string, masters []MasterSnapshot, vs []ReplicaVerdict) string {
	var lowest *MasterSnapshot
	for i := range masters {
		o := &masters[i]
		if o.ID == m.ID || o.Err != "" {
			continue
		}
		for _, s := range o.Jobs {
			if s.ID == job && (lowest == nil || o.Applied < lowest.Applied) {
				lowest = o
			}
		}
	}
	replica := ""
	for _, v := range vs {
		if v.Node == m.ID && v.Case != ReplicaAgrees {
			replica = fmt.Sprintf("; the replica check finds %s %s", m.ID, v.Case)
		}
	}
	switch {
	case lowest == nil:
		return fmt.Sprintf("no master lists it (%s read at applied index %d)%s", m.ID, m.Applied, replica)
	case m.Applied < lowest.Applied:
		return fmt.Sprintf("BEHIND: %s read its list at applied index %d, below %s's %d, which lists it%s", m.ID, m.Applied, lowest.ID, lowest.Applied, replica)
	default:
		return fmt.Sprintf("APART: %s read its list at applied index %d, at or above %s's %d, which lists it%s", m.ID, m.Applied, lowest.ID, lowest.Applied, replica)
	}
}
