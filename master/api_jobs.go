package master

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"jobmaster/api"
	"jobmaster/fsm"
	"jobmaster/jobspec"
	"jobmaster/strictjson"
)

// putJob: PUT /v1/jobs/{id}. Idempotent by id: 201 when created, 200 when
// the same spec is already there, 409 when a different one is.
func (m *Master) putJob(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	if err := jobspec.CheckID(id); err != nil {
		writeError(w, http.StatusBadRequest, "job id: "+err.Error())
		return
	}
	if strings.HasPrefix(id, "-") {
		writeError(w, http.StatusBadRequest, fmt.Sprintf("job id: %q starts with '-', which the command line would read as a flag; start it with a letter, a digit, '.' or '_'", id))
		return
	}
	m.submit(w, r, id, false)
}

// createJob: POST /v1/jobs. The id is chosen here, on the master that took
// the request, before it is relayed: a relay that must be retried cannot
// create the job twice. (A master of an earlier version forwarded the
// request with the id it chose in jobIDHeader.)
func (m *Master) createJob(w http.ResponseWriter, r *http.Request) {
	id := r.Header.Get(jobIDHeader)
	if id != "" {
		if err := jobspec.CheckID(id); err != nil {
			writeError(w, http.StatusBadRequest, "job id: "+err.Error())
			return
		}
	}
	m.submit(w, r, id, true)
}

// newJobID makes an id from the job's name (when it is a valid id) and 8
// random hex digits.
func newJobID(name string) string {
	var b [4]byte
	_, _ = rand.Read(b[:])
	suffix := hex.EncodeToString(b[:])
	prefix := "job"
	if name != "" && jobspec.CheckID(name) == nil && len(name) <= 100 && !strings.HasPrefix(name, "-") {
		prefix = name
	}
	return prefix + "-" + suffix
}

func (m *Master) listJobs(w http.ResponseWriter, r *http.Request, _ []byte, _ *session) error {
	f, err := parseJobFilter(r)
	if err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return nil
	}
	var jobs []fsm.JobSummary
	m.fsm.Read(func(st *fsm.State) {
		jobs = st.Jobs()
		m.setIndex(w, st)
	})
	out := api.JobList{Jobs: make([]api.JobSummary, 0, len(jobs))}
	for _, j := range jobs {
		if !f.keeps(j) {
			continue
		}
		out.Jobs = append(out.Jobs, api.JobSummary{ID: j.ID, Name: j.Name, Status: string(j.Status),
			SubmitTime: j.SubmitTime, EndTime: j.EndTime})
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

// jobFilter is what GET /v1/jobs lists: jobs of the statuses given (any
// when none) whose id starts with prefix.
type jobFilter struct {
	statuses map[fsm.JobStatus]bool
	prefix   string
}

func (f jobFilter) keeps(j fsm.JobSummary) bool {
	return (len(f.statuses) == 0 || f.statuses[j.Status]) && strings.HasPrefix(j.ID, f.prefix)
}

// parseJobFilter reads GET /v1/jobs's query: ?status (statuses, comma
// separated, in any case), ?prefix (of the id) and ?stale; anything else
// is an error naming it.
func parseJobFilter(r *http.Request) (jobFilter, error) {
	var f jobFilter
	q := r.URL.Query() // only these (takes)
	for _, v := range q["status"] {
		for _, st := range strings.Split(v, ",") {
			st = strings.ToUpper(strings.TrimSpace(st))
			if st == "" {
				continue
			}
			if !slices.Contains(fsm.JobStatuses, fsm.JobStatus(st)) {
				return f, fmt.Errorf("status %q: want one or more of %s, comma separated", strictjson.Short(st), joinStatuses())
			}
			if f.statuses == nil {
				f.statuses = make(map[fsm.JobStatus]bool)
			}
			f.statuses[fsm.JobStatus(st)] = true
		}
	}
	if len(q["prefix"]) > 1 {
		return f, errors.New("prefix may be given once")
	}
	f.prefix = q.Get("prefix")
	if len(f.prefix) > jobspec.MaxIDLength {
		return f, fmt.Errorf("prefix longer than %d characters", jobspec.MaxIDLength)
	}
	return f, nil
}

func joinStatuses() string {
	names := make([]string, len(fsm.JobStatuses))
	for i, st := range fsm.JobStatuses {
		names[i] = string(st)
	}
	return strings.Join(names, ", ")
}

// onlyParams is an error naming the first query parameter of q that is
// not among allowed (a typo, ?stail for ?stale, would otherwise be a
// different read than asked for without a word).
func onlyParams(q url.Values, allowed ...string) error {
	for _, k := range slices.Sorted(maps.Keys(q)) {
		if !slices.Contains(allowed, k) {
			return fmt.Errorf("unknown query parameter %q: this endpoint takes %s", strictjson.Short(k), strings.Join(allowed, ", "))
		}
	}
	return nil
}

// jobID is the job id of r's path, or, when it is no valid job id (no job
// can have it), false with a 400 answered that names the problem without
// echoing a long id whole.
func jobID(w http.ResponseWriter, r *http.Request) (string, bool) {
	id := r.PathValue("id")
	if err := jobspec.CheckID(id); err != nil {
		writeError(w, http.StatusBadRequest, "job id: "+err.Error())
		return "", false
	}
	return id, true
}

func (m *Master) getJob(w http.ResponseWriter, r *http.Request, _ []byte, _ *session) error {
	id, ok := jobID(w, r)
	if !ok {
		return nil
	}
	var v *fsm.JobView
	var gone fsm.Tombstone
	var forgotten bool
	m.fsm.Read(func(st *fsm.State) {
		v, ok = st.Job(id)
		if !ok {
			gone, forgotten = st.Tombstone(id)
		}
		m.setIndex(w, st)
	})
	if !ok {
		msg := fmt.Sprintf("job %q not found", id)
		if forgotten {
			msg += fmt.Sprintf(": a job of this id ended and was forgotten at %s (ended jobs are kept for --job-retention)", time.UnixMilli(gone.At).UTC().Format(time.RFC3339))
		}
		writeError(w, http.StatusNotFound, msg)
		return nil
	}
	writeJSON(w, http.StatusOK, jobToAPI(v))
	return nil
}

// setIndex names the applied index an answer is read at (api.IndexHeader):
// an event stream resumed from it continues the answer exactly.
func (m *Master) setIndex(w http.ResponseWriter, st *fsm.State) {
	w.Header().Set(api.IndexHeader, strconv.FormatUint(m.fsm.IndexOf(st), 10))
}

func jobToAPI(v *fsm.JobView) api.Job {
	out := api.Job{ID: v.ID, Name: v.Name, Status: string(v.Status), Restarts: v.Restarts, UncountedRestarts: v.UncountedRestarts, Message: v.Message,
		SubmitTime: v.SubmitTime, EndTime: v.EndTime, WaitingSlots: v.WaitingSlots, WaitingForDrain: v.WaitingForDrain, WaitingForDrainDeadline: v.WaitingForDrainDeadline, Vertices: make([]api.Vertex, 0, len(v.Vertices))}
	if v.Spec != nil && !v.Status.Terminal() {
		out.StartSlots = v.Spec.StartSlots()
		for _, sv := range v.Spec.Vertices {
			out.DeclaresResources = out.DeclaresResources || sv.Resources != nil && !sv.Resources.IsZero()
		}
	}
	for _, vv := range v.Vertices {
		av := api.Vertex{ID: vv.ID, Parallelism: vv.Parallelism, Inputs: inputsOf(v.Spec, vv.ID),
			Subtasks: make([]api.Subtask, 0, len(vv.Subtasks))}
		for _, e := range vv.Subtasks {
			st := api.Subtask{Index: e.Subtask, Attempt: e.Attempt, State: e.State,
				Executor: e.Executor, ExecutionID: e.ID, StartTime: e.StartTime, EndTime: e.EndTime, Message: e.Message}
			if e.Subtask < len(vv.Previous) && vv.Previous[e.Subtask].State != "" {
				p := vv.Previous[e.Subtask]
				st.PreviousAttempt = &api.PreviousAttempt{Attempt: p.Attempt, State: p.State, Message: p.Message, EndTime: p.EndTime, Executor: p.Executor}
			}
			av.Subtasks = append(av.Subtasks, st)
		}
		out.Vertices = append(out.Vertices, av)
	}
	return out
}

// inputsOf is the edges into the vertex id of spec, defaults filled in.
func inputsOf(spec *jobspec.Spec, id string) []api.Input {
	if spec == nil {
		return nil
	}
	var out []api.Input
	for _, v := range spec.Vertices {
		if v.ID != id {
			continue
		}
		for _, in := range v.Inputs {
			x := api.Input{From: in.From, Mode: in.Mode, Distribution: in.Distribution}
			if x.Mode == "" {
				x.Mode = jobspec.ModePipelined
			}
			if x.Distribution == "" {
				x.Distribution = jobspec.DistributionAllToAll
			}
			out = append(out, x)
		}
	}
	return out
}

func (m *Master) cancelJob(w http.ResponseWriter, r *http.Request, _ []byte, s *session) error {
	id, ok := jobID(w, r)
	if !ok {
		return nil // nothing proposed for an id no job can have
	}
	res, err := m.prop.ProposeOne(r.Context(), &fsm.CancelJob{Fenced: s.fenced(), ID: id})
	if err == nil {
		m.audit(r, "job cancel", "job", id)
	}
	switch {
	case errors.Is(err, fsm.ErrNotFound):
		writeError(w, http.StatusNotFound, fmt.Sprintf("job %q not found", id))
	case err != nil:
		return err
	default:
		writeJSON(w, http.StatusAccepted, api.CancelResponse{ID: id, Status: string(res.Status), Unchanged: res.Unchanged})
	}
	return nil
}
