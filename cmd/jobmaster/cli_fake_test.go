package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"jobmaster/api"
	"jobmaster/internal/freeport"
	"jobmaster/wire"
)

// fakeMaster is an in-memory master serving the public HTTP API. A job
// goes through the statuses of its script, one per GET of the job.
type fakeMaster struct {
	srv  *httptest.Server
	exec *httptest.Server // the executor serving logs
	// execRefuses makes the executor refuse every log read, as one with
	// TLS refuses a client without a certificate of the cluster.
	execRefuses atomic.Bool
	// relayedBytes, when not 0, is how many bytes the masters' log route
	// answers a read at once with.
	relayedBytes atomic.Int64
	// relayGone makes the masters' log route answer that the executor no
	// longer has the log.
	relayGone atomic.Bool

	mu     sync.Mutex
	jobs   map[string]*fakeJob
	order  []string
	nextID int
	script []string // statuses a new job goes through
	polls  chan string
	// drains holds the drain deadline of each draining executor.
	drains map[string]int64
}

type fakeJob struct {
	spec   string
	job    api.Job
	script []string
	// onCancel replaces the script on a cancel (default: CANCELLING,
	// CANCELED).
	onCancel []string
}

// newFakeMaster starts a fake master whose new jobs go through script
// (default: RUNNING then FINISHED).
func newFakeMaster(t *testing.T, script ...string) *fakeMaster {
	t.Helper()
	if len(script) == 0 {
		script = []string{"RUNNING", "FINISHED"}
	}
	f := &fakeMaster{jobs: map[string]*fakeJob{}, script: script, polls: make(chan string, 1000), drains: map[string]int64{}}
	mux := http.NewServeMux()
	mux.HandleFunc("PUT /v1/jobs/{id}", f.put)
	mux.HandleFunc("POST /v1/jobs", f.post)
	mux.HandleFunc("GET /v1/jobs", f.list)
	mux.HandleFunc("GET /v1/jobs/{id}", f.get)
	mux.HandleFunc("POST /v1/jobs/{id}/cancel", f.cancel)
	mux.HandleFunc("GET /v1/jobs/{id}/logs", f.logs)
	mux.HandleFunc("GET /v1/cluster", f.cluster)
	mux.HandleFunc("POST /v1/executors/{id}/drain", f.drain)
	mux.HandleFunc("DELETE /v1/executors/{id}/drain", f.drain)
	f.srv = httptest.NewServer(mux)
	t.Cleanup(f.srv.Close)
	f.exec = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != wire.PathLogs {
			http.NotFound(w, r)
			return
		}
		if f.execRefuses.Load() {
			writeJSON(w, http.StatusForbidden, api.Error{Error: "this executor answers only peers with a certificate from the cluster's CA; none was presented"})
			return
		}
		fmt.Fprintf(w, "%s of %s\n", r.URL.Query().Get("stream"), r.URL.Query().Get("id"))
	}))
	t.Cleanup(f.exec.Close)
	return f
}

// addr is the fake master's host:port.
func (f *fakeMaster) addr() string { return f.srv.Listener.Addr().String() }

// addJob adds a job that goes through script.
func (f *fakeMaster) addJob(t *testing.T, id, spec string, script ...string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	require.NoError(t, f.addLocked(id, spec, script))
}

func (f *fakeMaster) addLocked(id, spec string, script []string) error {
	var s struct {
		Name     string `json:"name"`
		Vertices []struct {
			ID          string `json:"id"`
			Parallelism int    `json:"parallelism"`
		} `json:"vertices"`
	}
	if err := json.Unmarshal([]byte(spec), &s); err != nil {
		return err
	}
	job := api.Job{ID: id, Name: s.Name, Status: "CREATED", SubmitTime: 1_700_000_000_000}
	for _, v := range s.Vertices {
		vx := api.Vertex{ID: v.ID, Parallelism: v.Parallelism}
		for i := range v.Parallelism {
			vx.Subtasks = append(vx.Subtasks, api.Subtask{Index: i, State: "SCHEDULED"})
		}
		job.Vertices = append(job.Vertices, vx)
	}
	f.jobs[id] = &fakeJob{spec: spec, job: job, script: append([]string(nil), script...)}
	f.order = append(f.order, id)
	return nil
}

// setStatus moves a job and all its subtasks to status.
func setStatus(j *api.Job, status string) {
	j.Status = status
	state := status
	switch status {
	case "CREATED", "RESTARTING":
		state = "SCHEDULED"
	case "CANCELLING":
		state = "CANCELING"
	case "FAILED":
		j.Message = "split[0] failed: exit status 1"
	}
	for vi := range j.Vertices {
		for si := range j.Vertices[vi].Subtasks {
			s := &j.Vertices[vi].Subtasks[si]
			s.State = wire.State(state)
			if state != "SCHEDULED" && s.Executor == "" {
				s.Executor = "e1"
				s.ExecutionID = fmt.Sprintf("%s/%s/%d/0", j.ID, j.Vertices[vi].ID, si)
			}
		}
	}
}

func (f *fakeMaster) put(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	id := r.PathValue("id")
	f.mu.Lock()
	defer f.mu.Unlock()
	if j, ok := f.jobs[id]; ok {
		if j.spec == string(body) {
			writeJSON(w, http.StatusOK, api.SubmitResponse{ID: id})
		} else {
			writeJSON(w, http.StatusConflict, api.Error{Error: fmt.Sprintf("job %q exists with a different spec", id)})
		}
		return
	}
	if err := f.addLocked(id, string(body), f.script); err != nil {
		writeJSON(w, http.StatusBadRequest, api.Error{Error: "malformed job spec: " + err.Error()})
		return
	}
	writeJSON(w, http.StatusCreated, api.SubmitResponse{ID: id})
}

func (f *fakeMaster) post(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	f.mu.Lock()
	defer f.mu.Unlock()
	f.nextID++
	id := fmt.Sprintf("job-%d", f.nextID)
	if err := f.addLocked(id, string(body), f.script); err != nil {
		writeJSON(w, http.StatusBadRequest, api.Error{Error: "malformed job spec: " + err.Error()})
		return
	}
	writeJSON(w, http.StatusCreated, api.SubmitResponse{ID: id})
}

func (f *fakeMaster) list(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := api.JobList{Jobs: []api.JobSummary{}}
	for _, id := range f.order {
		j := f.jobs[id].job
		out.Jobs = append(out.Jobs, api.JobSummary{ID: j.ID, Name: j.Name, Status: j.Status})
	}
	writeJSON(w, http.StatusOK, out)
}

func (f *fakeMaster) get(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	f.mu.Lock()
	defer f.mu.Unlock()
	j, ok := f.jobs[id]
	if !ok {
		writeJSON(w, http.StatusNotFound, api.Error{Error: fmt.Sprintf("job %q not found", id)})
		return
	}
	if len(j.script) > 0 {
		setStatus(&j.job, j.script[0])
		j.script = j.script[1:]
	}
	writeJSON(w, http.StatusOK, j.job)
	select {
	case f.polls <- id:
	default:
	}
}

func (f *fakeMaster) cancel(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	f.mu.Lock()
	defer f.mu.Unlock()
	j, ok := f.jobs[id]
	if !ok {
		writeJSON(w, http.StatusNotFound, api.Error{Error: fmt.Sprintf("job %q not found", id)})
		return
	}
	if terminalStatus(j.job.Status) {
		writeJSON(w, http.StatusAccepted, api.CancelResponse{ID: id, Status: j.job.Status, Unchanged: true})
		return
	}
	j.script = []string{"CANCELLING", "CANCELED"}
	if j.onCancel != nil {
		j.script = j.onCancel
	}
	w.WriteHeader(http.StatusAccepted)
}

// drain drains e1 (POST, deadline from 1.7e12 ms on) or ends its drain
// (DELETE); any other executor is unknown.
func (f *fakeMaster) drain(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	if id != "e1" {
		writeJSON(w, http.StatusNotFound, api.Error{Error: fmt.Sprintf("executor %q not found", id)})
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if r.Method == http.MethodDelete {
		delete(f.drains, id)
		writeJSON(w, http.StatusOK, api.DrainResponse{Executor: id})
		return
	}
	var req api.DrainRequest
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		writeJSON(w, http.StatusBadRequest, api.Error{Error: "malformed request body"})
		return
	}
	d, _ := time.ParseDuration(req.Deadline)
	f.drains[id] = 1_700_000_000_000 + d.Milliseconds()
	writeJSON(w, http.StatusAccepted, api.DrainResponse{Executor: id, Draining: true, Deadline: f.drains[id]})
}

// logs relays a log as the masters do (GET /v1/jobs/{id}/logs), to a
// request with a token: "relayed STREAM of EXECUTION", followed or not.
func (f *fakeMaster) logs(w http.ResponseWriter, r *http.Request) {
	if r.Header.Get(api.TokenHeader) == "" {
		writeJSON(w, http.StatusUnauthorized, api.Error{Error: "permission denied: GET " + r.URL.Path + " needs a token"})
		return
	}
	q := r.URL.Query()
	if f.relayGone.Load() {
		writeJSON(w, http.StatusNotFound, api.Error{Error: "executor e1 no longer has the log of " + q.Get("execution")})
		return
	}
	w.Header().Set(api.LogExecutorHeader, "e1")
	if q.Get("follow") == "1" {
		w.Header().Set("Trailer", wire.HeaderEnd)
		defer w.Header().Set(wire.HeaderEnd, wire.EndComplete)
	} else if n := f.relayedBytes.Load(); n > 0 {
		w.Header().Set("Content-Length", strconv.FormatInt(n, 10))
		_, _ = io.WriteString(w, strings.Repeat("x", int(n)))
		return
	}
	fmt.Fprintf(w, "relayed %s of %s\n", q.Get("stream"), q.Get("execution"))
}

func (f *fakeMaster) cluster(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	deadline, draining := f.drains["e1"]
	f.mu.Unlock()
	leader := "m2"
	writeJSON(w, http.StatusOK, api.Cluster{
		Leader:       &leader,
		FencingToken: 42,
		Masters: []api.Master{
			{ID: "m1", HTTPAddr: "127.0.0.1:7401", Role: "follower"},
			{ID: "m2", HTTPAddr: "127.0.0.1:7402", Role: "leader"},
			{ID: "m3", HTTPAddr: "127.0.0.1:7403", Role: "follower"},
		},
		Executors: []api.Executor{
			{ID: "e1", HTTPAddr: f.exec.Listener.Addr().String(), Slots: 4, FreeSlots: 2, Status: "alive", Draining: draining, DrainDeadline: deadline},
		},
	})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// deadAddr returns a host:port where nothing listens.
// It comes from freeport, so no other test is handed the same port.
func deadAddr(t *testing.T) string { return freeport.Must(t) }

// result is what one CLI run printed and returned.
type result struct {
	code           int
	stdout, stderr string
}

// cli runs the jobmaster command line in-process.
type cli struct {
	env   map[string]string
	stdin string
	ctx   context.Context
}

// run executes args and returns the exit code and output.
func (c cli) run(args ...string) result {
	var stdout, stderr bytes.Buffer
	ctx := c.ctx
	if ctx == nil {
		ctx = context.Background()
	}
	code := run(ctx, args, &cliEnv{
		stdin:        strings.NewReader(c.stdin),
		stdout:       &stdout,
		stderr:       &stderr,
		getenv:       func(k string) string { return c.env[k] },
		pollInterval: 2 * time.Millisecond,
		stuckAfter:   20 * time.Millisecond,
		terminal:     func(io.Writer) (termSize, bool) { return termSize{}, false },
	})
	return result{code: code, stdout: stdout.String(), stderr: stderr.String()}
}

// runCLI runs args against the master at addr.
func runCLI(addr string, args ...string) result {
	return cli{env: map[string]string{addressEnv: addr}}.run(args...)
}
