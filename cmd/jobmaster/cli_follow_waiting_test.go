package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"jobmaster/api"
	"jobmaster/client"
)

type notesView struct {
	quietView
	mu    sync.Mutex
	notes []string
}

func (v *notesView) note(m string) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if m != "" {
		v.notes = append(v.notes, m)
	}
}

// job run --wait and job status --follow read the job once, then follow
// its events: the waiting_slots of that first read (a CREATED job's first
// region) says nothing of the job once it runs. A job whose subtasks all
// run is not said to wait (it was, for its "next region", for as long as
// it ran).
func TestAFollowedJobWhoseSubtasksRunIsNotSaidToWait(t *testing.T) {
	addr := newServerAt(t, func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/v1/jobs/j":
			w.Header().Set(api.IndexHeader, "5")
			writeJSON(w, http.StatusOK, api.Job{ID: "j", Status: "CREATED", StartSlots: 2, WaitingSlots: 2,
				Vertices: []api.Vertex{{ID: "a", Parallelism: 2, Subtasks: []api.Subtask{{Index: 0, State: "SCHEDULED"}, {Index: 1, State: "SCHEDULED"}}}}})
		case "/v1/cluster":
			writeJSON(w, http.StatusOK, api.Cluster{Executors: []api.Executor{{ID: "e1", HTTPAddr: "127.0.0.1:1", Slots: 4, FreeSlots: 2, Status: "alive"}}})
		case "/v1/events":
			w.Header().Set("Content-Type", "application/x-ndjson")
			enc := json.NewEncoder(w)
			zero, one := 0, 1
			_ = enc.Encode(api.Event{Index: 6, Type: "job-status", Job: "j", State: "RUNNING"})
			for _, i := range []*int{&zero, &one} {
				_ = enc.Encode(api.Event{Index: 6, Type: "execution-state", Job: "j", Vertex: "a", Subtask: i, Attempt: &zero,
					Execution: fmt.Sprintf("j/a/%d/0", *i), Executor: "e1", State: "RUNNING"})
			}
			w.(http.Flusher).Flush()
			for i := 0; r.Context().Err() == nil; i++ {
				_ = enc.Encode(api.Event{Index: 6, Type: api.EventHeartbeat})
				w.(http.Flusher).Flush()
				time.Sleep(200 * time.Millisecond)
			}
		default:
			http.NotFound(w, r)
		}
	})
	c, err := client.New(addr)
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 2500*time.Millisecond)
	defer cancel()
	v := &notesView{}
	job, _, _ := followJob(ctx, c, "j", v, waitOpts{interval: 50 * time.Millisecond, stuckAfter: 20 * time.Millisecond})
	require.Equal(t, "RUNNING", job.Status)
	v.mu.Lock()
	defer v.mu.Unlock()
	require.Empty(t, v.notes, "every subtask of the job's only region RUNNING")
}
