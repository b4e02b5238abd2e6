package master

import (
	"context"
	"net/http"
	"time"

	"jobmaster/fsm"
	"jobmaster/jobspec"
)

// Reads of big jobs share a budget. An answer to GET /v1/jobs/{id} holds
// the job's subtasks three times while it is made (the state's view, the
// API value and its JSON), about 600 B a subtask: a job of 100,000
// subtasks answers 20 MB, and 40 reads of one at once took a master from
// 0.84 to 2.27 GB. A read of a job that costs more than smallRead
// (fsm.State.JobReadCost: its subtasks, and its messages' bytes in
// subtasks' worth) takes that many units of readBudget (two of the largest
// jobs) while its answer is made and written; other such reads wait for
// their turn, or end with their request. Every answer's writing is bounded
// in time.
const (
	readBudget = 2 * jobspec.MaxTotalSubtasks
	smallRead  = 1000
	// bigReadWriteTimeout bounds the writing of a big job's answer (20 MB
	// at most), so that a client that stops reading gives its share of
	// the budget back.
	bigReadWriteTimeout = time.Minute
)

// bigRead gives a read of job {id} its share of this master's budget,
// whether the master answers it or forwards it to the leader (a forwarded
// answer is held here whole too: each master bounds its own memory), and
// bounds the writing of a big answer, so that a client that stops reading
// gives its share back.
func (m *Master) bigRead(h http.HandlerFunc) http.HandlerFunc {
	return m.budgeted(func(st *fsm.State, r *http.Request) int { return st.JobReadCost(r.PathValue("id")) }, h)
}

// jobsPerReadUnit: a job's line in GET /v1/jobs (about 150 bytes of JSON)
// costs a quarter of a subtask of a job's answer.
const jobsPerReadUnit = 4

// listRead is bigRead for GET /v1/jobs, whose answer grows with the jobs
// kept (100,000 at most by default, about 15 MB).
func (m *Master) listRead(h http.HandlerFunc) http.HandlerFunc {
	return m.budgeted(func(st *fsm.State, _ *http.Request) int { return st.NumJobs() / jobsPerReadUnit }, h)
}

// budgeted runs h with the share of the read budget that cost says its
// answer takes, and bounds the writing of it.
func (m *Master) budgeted(cost func(*fsm.State, *http.Request) int, h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		var size int
		m.fsm.Read(func(st *fsm.State) { size = cost(st, r) })
		release, err := m.acquireRead(r.Context(), size)
		if err != nil {
			return // the request has ended
		}
		defer release()
		// Every answer's writing is bounded: a reader that stops reading
		// holds it, whatever its size, for no longer than this.
		_ = http.NewResponseController(w).SetWriteDeadline(time.Now().Add(m.bigReadWrite))
		h(w, r)
	}
}

// acquireRead waits for room in the budget to read a job that costs cost
// (fsm.State.JobReadCost), and returns what gives it back.
func (m *Master) acquireRead(ctx context.Context, cost int) (release func(), err error) {
	if cost <= smallRead {
		return func() {}, nil
	}
	n := int64(min(cost, readBudget))
	if err := m.bigReads.Acquire(ctx, n); err != nil {
		return nil, err
	}
	return func() { m.bigReads.Release(n) }, nil
}
