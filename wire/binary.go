package wire

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"mime"
	"strconv"
	"strings"
)

// The deploy exchange in binary. A deploy is the request a leader sends
// most (a 1,000-job burst on 100 executors is about 2,000 of them), and
// JSON was a seventh of the CPU of placing such a burst: the executor's
// decoding of the request, the leader's of the answer, and the encoding on
// both sides. A leader sends a deploy as BinaryType and the executor
// answers a 200 in the same format; an error answer stays JSON, as on
// every other path. An executor that predates the format refuses the body
// (415) and acts on nothing, and the leader sends it JSON from then on.
//
// A deploy's media type names the revision of its format too
// (DeployType), so that a leader and an executor of releases whose formats
// differ fall back to JSON rather than misread each other.
//
// Reports go the other way in binary too: they are what a leader decodes
// most (every heartbeat's answer, and every push of executions started or
// ended), and decoding them as JSON was a quarter of a leader's CPU while
// it placed a job of 10,000 subtasks. Unlike JSON, the format has no room
// for fields a reader does not know, so a report's media type names its
// revision (ReportType: "report=1"), and a release that changes the
// report's fields changes ReportRevision. A leader asks for a heartbeat's
// answer in the revision it reads (AcceptReport, in the Accept header); an
// executor that writes that revision answers so, and from then on pushes
// to that leader in it as well. Any other pairing speaks JSON: an older
// executor or one of another revision answers JSON, which every leader
// takes; an older leader never asks; a push in a revision the master does
// not read is refused (415) having done nothing, and the executor sends it
// again as JSON.
//
// The format: a kind byte (kindDeploy, kindDeployResponse, kindReport), then the
// fields in the order of the struct, each a zigzag varint (numbers), a
// byte (booleans), a uvarint length and the bytes (strings), or a uvarint
// count and the elements (slices and maps; a map as key, value pairs). A
// count of elements that the bytes left could not hold (each element's
// fields take at least a byte each), or a length larger than the bytes
// left, is refused before anything is allocated for it: a body of n bytes
// makes at most about 16n bytes of values (a 160-byte TaskGroup for every
// 10 bytes), where JSON's "{}," makes a whole struct of three. Nothing may
// follow the last field.

// BinaryType is the media type of a deploy, its answer, or a report in
// binary.
const BinaryType = "application/octet-stream"

// IsBinary reports whether a Content-Type header names BinaryType (with
// any parameters).
func IsBinary(contentType string) bool {
	mt, _, err := mime.ParseMediaType(contentType)
	return err == nil && strings.EqualFold(mt, BinaryType)
}

// DeployRevision is the revision of the binary deploy this release writes
// and reads; DeployType its media type. A deploy sent as plain BinaryType
// is of revision 1, the first (a leader of the release before revisions
// sends it so). An executor refuses (415) a deploy of a revision it does
// not read, having done nothing, and the leader sends JSON instead.
const (
	DeployRevision = "1"
	DeployType     = BinaryType + "; deploy=" + DeployRevision
)

// IsDeploy reports whether a Content-Type header names a binary deploy
// this release reads: of DeployRevision, or of none (revision 1).
func IsDeploy(contentType string) bool {
	mt, params, err := mime.ParseMediaType(contentType)
	if err != nil || !strings.EqualFold(mt, BinaryType) {
		return false
	}
	rev, ok := params["deploy"]
	return rev == DeployRevision || !ok && DeployRevision == "1"
}

// ReportRevision is the revision of the binary report this release writes
// and reads; ReportType its media type.
const (
	ReportRevision = "1"
	ReportType     = BinaryType + "; report=" + ReportRevision
)

// AcceptReport is the Accept header of a heartbeat from a leader that takes
// reports in binary, of ReportRevision, or else as JSON.
const AcceptReport = ReportType + ", application/json;q=0.5"

// IsReport reports whether a Content-Type header names a binary report of
// ReportRevision.
func IsReport(contentType string) bool {
	mt, params, err := mime.ParseMediaType(contentType)
	return err == nil && strings.EqualFold(mt, BinaryType) && params["report"] == ReportRevision
}

// AcceptsReport reports whether Accept header values take a binary report
// of ReportRevision (with a quality above zero).
func AcceptsReport(accept []string) bool {
	for _, v := range accept {
		for part := range strings.SplitSeq(v, ",") {
			mt, params, err := mime.ParseMediaType(part)
			if err != nil || !strings.EqualFold(mt, BinaryType) || params["report"] != ReportRevision {
				continue
			}
			if q, err := strconv.ParseFloat(params["q"], 64); params["q"] == "" || err == nil && q > 0 {
				return true
			}
		}
	}
	return false
}

// ReportExecutor reads only the executor a binary report names (what a
// check of who may push needs), without decoding the rest.
func ReportExecutor(data []byte) (string, error) {
	d := decoder{data: data}
	d.kind(kindReport)
	d.int() // the version
	name := d.string()
	return name, d.err
}

const (
	kindDeploy         byte = 0xD1
	kindDeployResponse byte = 0xD2
	kindReport         byte = 0xD3
)

// The fewest bytes a TaskGroup, an ExecutionStatus and a Partition take:
// one per field.
const (
	minGroup     = 10
	minStatus    = 10
	minPartition = 6
)

// errBinary is the cause of every decoding error.
var errBinary = errors.New("malformed binary body")

// AppendDeploy appends r in binary to b.
func AppendDeploy(b []byte, r *DeployRequest) []byte {
	b = append(b, kindDeploy)
	b = appendLeader(b, &r.Leader)
	b = binary.AppendUvarint(b, uint64(len(r.Groups)))
	for i := range r.Groups {
		b = appendGroup(b, &r.Groups[i])
	}
	return b
}

// DecodeDeploy decodes a deploy that AppendDeploy wrote.
func DecodeDeploy(data []byte) (DeployRequest, error) {
	d := decoder{data: data}
	var r DeployRequest
	d.kind(kindDeploy)
	d.leader(&r.Leader)
	if n := d.count(minGroup); n > 0 {
		r.Groups = make([]TaskGroup, n)
		for i := range r.Groups {
			d.group(&r.Groups[i])
		}
	}
	return r, d.end()
}

// AppendDeployResponse appends r in binary to b.
func AppendDeployResponse(b []byte, r *DeployResponse) []byte {
	b = append(b, kindDeployResponse)
	return appendStatuses(b, r.Executions)
}

// DecodeDeployResponse decodes an answer that AppendDeployResponse wrote.
func DecodeDeployResponse(data []byte) (DeployResponse, error) {
	d := decoder{data: data}
	var r DeployResponse
	d.kind(kindDeployResponse)
	r.Executions = d.statuses()
	return r, d.end()
}

// AppendReport appends r in binary to b.
func AppendReport(b []byte, r *Report) []byte {
	b = append(b, kindReport)
	b = binary.AppendVarint(b, int64(r.Version))
	b = appendString(b, r.Executor)
	b = appendString(b, r.Instance)
	b = binary.AppendUvarint(b, r.Token)
	b = binary.AppendVarint(b, int64(r.Slots))
	b = binary.AppendVarint(b, int64(r.UsedSlots))
	b = binary.AppendVarint(b, r.LeaseMs)
	b = appendBool(b, r.Partial)
	b = appendStatuses(b, r.Executions)
	b = binary.AppendUvarint(b, uint64(len(r.Partitions)))
	for i := range r.Partitions {
		p := &r.Partitions[i]
		b = appendString(b, p.ID)
		b = appendString(b, p.JobID)
		b = appendString(b, p.Vertex)
		b = binary.AppendVarint(b, int64(p.Subtask))
		b = binary.AppendVarint(b, int64(p.Attempt))
		b = binary.AppendVarint(b, p.Bytes)
	}
	b = appendBool(b, r.DiskFull)
	b = appendString(b, r.StorageError)
	b = binary.AppendVarint(b, r.CPUMillis)
	return binary.AppendVarint(b, r.MemoryMB)
}

// DecodeReport decodes a report that AppendReport wrote.
func DecodeReport(data []byte) (Report, error) {
	d := decoder{data: data}
	var r Report
	d.kind(kindReport)
	r.Version = d.int()
	r.Executor = d.string()
	r.Instance = d.string()
	r.Token = d.uvarint()
	r.Slots = d.int()
	r.UsedSlots = d.int()
	r.LeaseMs = d.int64()
	r.Partial = d.bool()
	r.Executions = d.statuses()
	if n := d.countMax(minPartition, MaxReportPartitions, "partitions"); n > 0 {
		r.Partitions = make([]Partition, n)
		for i := range r.Partitions {
			p := &r.Partitions[i]
			p.ID = d.string()
			p.JobID = d.string()
			p.Vertex = d.string()
			p.Subtask = d.int()
			p.Attempt = d.int()
			p.Bytes = d.int64()
		}
	}
	r.DiskFull = d.bool()
	r.StorageError = d.string()
	r.CPUMillis = d.int64()
	r.MemoryMB = d.int64()
	return r, d.end()
}

func appendStatuses(b []byte, ss []ExecutionStatus) []byte {
	b = binary.AppendUvarint(b, uint64(len(ss)))
	for i := range ss {
		s := &ss[i]
		b = appendString(b, s.ExecutionID)
		b = appendString(b, s.JobID)
		b = appendString(b, s.Vertex)
		b = binary.AppendVarint(b, int64(s.Subtask))
		b = binary.AppendVarint(b, int64(s.Attempt))
		b = binary.AppendVarint(b, int64(s.Slot))
		b = appendString(b, string(s.State))
		b = appendString(b, s.Message)
		b = binary.AppendVarint(b, s.Bytes)
		b = appendStrings(b, s.Unavailable)
	}
	return b
}

func appendLeader(b []byte, l *Leader) []byte {
	b = binary.AppendVarint(b, int64(l.Version))
	b = appendString(b, l.Cluster)
	b = binary.AppendUvarint(b, l.Token)
	b = appendString(b, l.Node)
	return appendString(b, l.Addr)
}

func appendGroup(b []byte, g *TaskGroup) []byte {
	b = appendString(b, g.JobID)
	b = appendString(b, g.Vertex)
	b = binary.AppendVarint(b, int64(g.Parallelism))
	b = appendStrings(b, g.Command)
	b = binary.AppendUvarint(b, uint64(len(g.Env)))
	for k, v := range g.Env { // any order: a map has none
		b = appendString(b, k)
		b = appendString(b, v)
	}
	b = binary.AppendUvarint(b, uint64(len(g.Outputs)))
	for _, o := range g.Outputs {
		b = appendString(b, o.Vertex)
		b = binary.AppendVarint(b, int64(o.Parallelism))
		b = appendString(b, o.Mode)
		b = appendBool(b, o.Forward)
	}
	b = binary.AppendUvarint(b, uint64(len(g.Inputs)))
	for _, in := range g.Inputs {
		b = appendString(b, in.Vertex)
		b = appendString(b, in.Mode)
		b = appendBool(b, in.Forward)
		b = binary.AppendUvarint(b, uint64(len(in.Sources)))
		for _, s := range in.Sources {
			b = binary.AppendVarint(b, int64(s.Subtask))
			b = appendString(b, s.Execution)
			b = appendString(b, s.Executor)
			b = appendString(b, s.Addr)
		}
	}
	b = binary.AppendVarint(b, g.Resources.CPUMillis)
	b = binary.AppendVarint(b, g.Resources.MemoryMB)
	b = binary.AppendUvarint(b, uint64(len(g.Subtasks)))
	for _, n := range g.Subtasks {
		b = binary.AppendVarint(b, int64(n))
	}
	return b
}

func appendString(b []byte, s string) []byte {
	b = binary.AppendUvarint(b, uint64(len(s)))
	return append(b, s...)
}

func appendStrings(b []byte, ss []string) []byte {
	b = binary.AppendUvarint(b, uint64(len(ss)))
	for _, s := range ss {
		b = appendString(b, s)
	}
	return b
}

func appendBool(b []byte, v bool) []byte {
	if v {
		return append(b, 1)
	}
	return append(b, 0)
}

// decoder reads a binary body. The first error sticks: every later read
// returns a zero value, and end returns the error.
type decoder struct {
	data []byte
	err  error
}

func (d *decoder) fail(format string, args ...any) {
	if d.err == nil {
		d.err = fmt.Errorf("%w: %s", errBinary, fmt.Sprintf(format, args...))
		d.data = nil
	}
}

func (d *decoder) kind(want byte) {
	if len(d.data) == 0 || d.data[0] != want {
		d.fail("not the expected message")
		return
	}
	d.data = d.data[1:]
}

func (d *decoder) end() error {
	if d.err == nil && len(d.data) > 0 {
		d.fail("%d bytes after the end", len(d.data))
	}
	return d.err
}

func (d *decoder) uvarint() uint64 {
	if d.err != nil {
		return 0
	}
	v, n := binary.Uvarint(d.data)
	if n <= 0 {
		d.fail("truncated or overlong number")
		return 0
	}
	d.data = d.data[n:]
	return v
}

func (d *decoder) int64() int64 {
	if d.err != nil {
		return 0
	}
	v, n := binary.Varint(d.data)
	if n <= 0 {
		d.fail("truncated or overlong number")
		return 0
	}
	d.data = d.data[n:]
	return v
}

// int reads a number that must fit a 32-bit int (subtasks, attempts,
// slots, parallelisms: all far below).
func (d *decoder) int() int {
	v := d.int64()
	if v < math.MinInt32 || v > math.MaxInt32 {
		d.fail("number %d out of range", v)
		return 0
	}
	return int(v)
}

// count reads how many elements follow, each of which takes at least min
// bytes: more than the bytes left can hold is an error.
func (d *decoder) count(min int) int {
	return d.countMax(min, math.MaxInt, "elements")
}

// countMax is count, and more than max elements (what, for the error) is
// an error too.
func (d *decoder) countMax(min, max int, what string) int {
	n := d.uvarint()
	if n > uint64(len(d.data)/min) {
		d.fail("%d elements in %d bytes", n, len(d.data))
		return 0
	}
	if n > uint64(max) {
		d.fail("%d %s, at most %d are read", n, what, max)
		return 0
	}
	return int(n)
}

func (d *decoder) string() string {
	n := d.uvarint()
	if n > uint64(len(d.data)) {
		d.fail("a string of %d bytes in %d", n, len(d.data))
		return ""
	}
	s := string(d.data[:n])
	d.data = d.data[n:]
	return s
}

func (d *decoder) bool() bool {
	if d.err != nil {
		return false
	}
	if len(d.data) == 0 || d.data[0] > 1 {
		d.fail("not a boolean")
		return false
	}
	v := d.data[0] == 1
	d.data = d.data[1:]
	return v
}

// strings reads a list of strings; an empty one is nil.
func (d *decoder) strings() []string {
	return d.stringsMax(math.MaxInt, "strings")
}

// stringsMax is strings, of at most max (what, for the error).
func (d *decoder) stringsMax(max int, what string) []string {
	n := d.countMax(1, max, what)
	if n == 0 {
		return nil
	}
	out := make([]string, n)
	for i := range out {
		out[i] = d.string()
	}
	return out
}

// statuses reads a list of execution statuses; an empty one is nil.
func (d *decoder) statuses() []ExecutionStatus {
	n := d.countMax(minStatus, MaxReportExecutions, "executions")
	if n == 0 {
		return nil
	}
	out := make([]ExecutionStatus, n)
	total := 0 // unavailable partitions so far
	for i := range out {
		s := &out[i]
		s.ExecutionID = d.string()
		s.JobID = d.string()
		s.Vertex = d.string()
		s.Subtask = d.int()
		s.Attempt = d.int()
		s.Slot = d.int()
		s.State = State(d.string())
		s.Message = d.string()
		s.Bytes = d.int64()
		s.Unavailable = d.stringsMax(min(MaxUnavailable, MaxReportUnavailable-total), "unavailable partitions")
		total += len(s.Unavailable)
	}
	return out
}

func (d *decoder) leader(l *Leader) {
	l.Version = d.int()
	l.Cluster = d.string()
	l.Token = d.uvarint()
	l.Node = d.string()
	l.Addr = d.string()
}

func (d *decoder) group(g *TaskGroup) {
	g.JobID = d.string()
	g.Vertex = d.string()
	g.Parallelism = d.int()
	g.Command = d.strings()
	if n := d.count(2); n > 0 {
		g.Env = make(map[string]string, n)
		for range n {
			k := d.string()
			g.Env[k] = d.string()
		}
	}
	if n := d.count(4); n > 0 {
		g.Outputs = make([]Output, n)
		for i := range g.Outputs {
			o := &g.Outputs[i]
			o.Vertex = d.string()
			o.Parallelism = d.int()
			o.Mode = d.string()
			o.Forward = d.bool()
		}
	}
	if n := d.count(4); n > 0 {
		g.Inputs = make([]Input, n)
		for i := range g.Inputs {
			in := &g.Inputs[i]
			in.Vertex = d.string()
			in.Mode = d.string()
			in.Forward = d.bool()
			if k := d.count(4); k > 0 {
				in.Sources = make([]Source, k)
				for j := range in.Sources {
					s := &in.Sources[j]
					s.Subtask = d.int()
					s.Execution = d.string()
					s.Executor = d.string()
					s.Addr = d.string()
				}
			}
		}
	}
	g.Resources.CPUMillis = d.int64()
	g.Resources.MemoryMB = d.int64()
	if n := d.count(1); n > 0 {
		g.Subtasks = make([]int, n)
		for i := range g.Subtasks {
			g.Subtasks[i] = d.int()
		}
	}
}
