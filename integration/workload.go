package integration

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"sort"
	"strconv"
	"sync"
	"syscall"
	"time"

	"jobmaster/client"
)

// The chaos workload: concurrent clients submit jobs under their own ids
// (PUT, idempotent) to masters picked at random, retry the same id through
// every error until it is acknowledged, cancel some jobs, and keep a few
// jobs in flight each. Which jobs each client submits (specs, kinds,
// cancels) follows from the seed; when they run depends on the machine.

// genJob draws one job: its spec and what the checker may expect of it.
//
// Kinds:
//   - steady: no task fails on purpose; a generous restart budget
//     (fixed-delay 1000 attempts, exponential-delay without a limit, or
//     failure-rate 1000 per 10 minutes): FINISHED unless cancelled.
//   - flaky: one vertex fails its first one or two attempts on purpose;
//     the same generous budgets: FINISHED unless cancelled.
//   - doomed-none: restart strategy none and one vertex that always fails:
//     FAILED, and no subtask gets a second attempt.
//   - doomed-budget: a budget of 2 restarts (fixed-delay, failure-rate per
//     hour, or exponential-delay with 2 attempts) and a vertex that always
//     fails: FAILED, and no subtask gets beyond attempt 2.
//
// Graphs: one vertex; src -pipelined-> map (one region, slot sharing); a
// -blocking-> b; or src -pipelined-> map -blocking-> sink; failover region
// or full.
func genJob(rng *rand.Rand, id string) (spec []byte, rec JobRecord) {
	rec = JobRecord{ID: id, Want: WantFinished, MaxAttempt: -1}
	switch r := rng.IntN(100); {
	case r < 35:
		rec.Kind, rec.NoFailures = "steady", true
	case r < 65:
		rec.Kind = "flaky"
	case r < 82:
		rec.Kind, rec.Want, rec.MaxAttempt = "doomed-none", WantFailed, 0
	default:
		rec.Kind, rec.Want, rec.MaxAttempt = "doomed-budget", WantFailed, 2
	}
	type input struct {
		From string `json:"from"`
		Mode string `json:"mode"`
	}
	type vtx struct {
		ID          string            `json:"id"`
		Parallelism int               `json:"parallelism"`
		Command     []string          `json:"command"`
		Env         map[string]string `json:"env"`
		Inputs      []input           `json:"inputs,omitempty"`
	}
	par := 1 + rng.IntN(3)
	mk := func(name string, p int, inputs ...input) vtx {
		return vtx{ID: name, Parallelism: p, Command: chaosTask(), Inputs: inputs,
			Env: map[string]string{"CHAOS_TICKS": strconv.Itoa(3 + rng.IntN(13)), "CHAOS_FAIL_BELOW": "0"}}
	}
	var vs []vtx
	switch rng.IntN(4) {
	case 0:
		vs = []vtx{mk("v", par)}
	case 1:
		vs = []vtx{mk("src", par), mk("map", par, input{"src", "pipelined"})}
	case 2:
		vs = []vtx{mk("a", par), mk("b", 1, input{"a", "blocking"})}
	default:
		vs = []vtx{mk("src", par), mk("map", par, input{"src", "pipelined"}), mk("sink", 1, input{"map", "blocking"})}
	}
	bad := rng.IntN(len(vs))
	switch rec.Kind {
	case "flaky":
		vs[bad].Env["CHAOS_FAIL_BELOW"] = strconv.Itoa(1 + rng.IntN(2))
	case "doomed-none", "doomed-budget":
		vs[bad].Env["CHAOS_FAIL_BELOW"] = "-1"
	}
	var restart map[string]any
	switch rec.Kind {
	case "doomed-none":
		restart = map[string]any{"strategy": "none"}
	case "doomed-budget":
		switch rng.IntN(3) {
		case 0:
			restart = map[string]any{"strategy": "fixed-delay", "attempts": 2, "delay": "100ms"}
		case 1:
			restart = map[string]any{"strategy": "failure-rate", "max_failures": 2, "interval": "1h", "delay": "100ms"}
		default:
			restart = map[string]any{"strategy": "exponential-delay", "attempts": 2, "initial_delay": "50ms", "max_delay": "200ms"}
		}
	default:
		switch rng.IntN(3) {
		case 0:
			restart = map[string]any{"strategy": "fixed-delay", "attempts": 1000, "delay": fmt.Sprintf("%dms", 50+rng.IntN(250))}
		case 1:
			restart = map[string]any{"strategy": "exponential-delay", "initial_delay": "50ms", "max_delay": "1s", "jitter": 0.2}
		default:
			restart = map[string]any{"strategy": "failure-rate", "max_failures": 1000, "interval": "10m", "delay": "100ms"}
		}
	}
	failover := "region"
	if rng.IntN(10) < 3 {
		failover = "full"
	}
	rec.Kind += fmt.Sprintf("/%s/%d-vertex/%s", restart["strategy"], len(vs), failover)
	spec, err := json.Marshal(map[string]any{"name": id, "vertices": vs, "restart": restart, "failover": failover})
	if err != nil {
		panic(err)
	}
	return spec, rec
}

// workload runs the clients and keeps their records.
type workload struct {
	seed     uint64
	masters  []*client.Client // one per master: a request goes to the one picked
	ids      []string         // the masters' ids, in the same order
	clients  int
	inFlight int // jobs per client not yet seen terminal
	logf     func(string, ...any)

	mu        sync.Mutex
	jobs      map[string]*JobRecord
	order     []string
	errs      map[string]int // retried errors by kind
	harness   []string       // answers that mean the harness is wrong (400s)
	notFounds []NotFound
}

func newWorkload(seed uint64, c *Cluster, clients, inFlight int, logf func(string, ...any)) (*workload, error) {
	w := &workload{seed: seed, clients: clients, inFlight: inFlight, logf: logf,
		jobs: map[string]*JobRecord{}, errs: map[string]int{}}
	// The client library retries a master that answers 503 or cannot be
	// reached until the call's timeout; count those rounds too.
	notify := client.WithRetryNotify(func(err *client.UnreachableError) {
		for _, a := range err.Attempts {
			w.noteErr(a.Err)
		}
	})
	for _, m := range c.Masters {
		cl, err := client.New(m.HTTPAddr, client.WithTimeout(8*time.Second), client.WithAttemptTimeout(4*time.Second), notify)
		if err != nil {
			return nil, err
		}
		w.masters = append(w.masters, cl)
		w.ids = append(w.ids, m.ID)
	}
	return w, nil
}

func (w *workload) close() {
	for _, c := range w.masters {
		c.Close()
	}
}

// errKind names an error for the retry statistics.
func errKind(err error) string {
	var api *client.APIError
	var un *client.UnreachableError
	switch {
	case errors.As(err, &api):
		return fmt.Sprintf("HTTP %d", api.StatusCode)
	case errors.Is(err, context.DeadlineExceeded) || errors.Is(err, os.ErrDeadlineExceeded):
		return "timeout"
	case errors.Is(err, syscall.ECONNREFUSED):
		return "connection refused"
	case errors.As(err, &un):
		return "no master answered"
	}
	return "other"
}

func (w *workload) noteErr(err error) {
	w.mu.Lock()
	w.errs[errKind(err)]++
	w.mu.Unlock()
}

// Records returns the job records, in submission order.
func (w *workload) Records() []JobRecord {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := make([]JobRecord, 0, len(w.order))
	for _, id := range w.order {
		out = append(out, *w.jobs[id])
	}
	return out
}

// Errors returns the retried errors by kind, sorted.
func (w *workload) Errors() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	var out []string
	for k, n := range w.errs {
		out = append(out, fmt.Sprintf("%s: %d", k, n))
	}
	sort.Strings(out)
	return out
}

// Run starts the clients; they submit until submitting closes, and return
// once every job they submitted is acknowledged (or stop closes).
func (w *workload) Run(submitting, stop <-chan struct{}) *sync.WaitGroup {
	var wg sync.WaitGroup
	for k := 0; k < w.clients; k++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			w.client(k, submitting, stop)
		}()
	}
	return &wg
}

func closed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// newRand is a random source for one seed (tests replay genJob with it).
func newRand(seed uint64) *rand.Rand { return rand.New(rand.NewPCG(seed, 1)) }

func (w *workload) client(k int, submitting, stop <-chan struct{}) {
	jobs := rand.New(rand.NewPCG(w.seed, uint64(k)+1))    // what to submit: from the seed
	pick := rand.New(rand.NewPCG(w.seed, uint64(k)+1000)) // which master: from the seed too
	var live []string                                     // submitted, not yet seen terminal
	var cancels sync.WaitGroup
	defer cancels.Wait()
	for n := 1; !closed(submitting); n++ {
		for len(live) >= w.inFlight && !closed(submitting) {
			live = w.stillLive(live, pick)
			if len(live) >= w.inFlight {
				sleepOrStop(300*time.Millisecond, submitting)
			}
		}
		if closed(submitting) {
			return
		}
		id := fmt.Sprintf("c%d-%04d", k+1, n)
		spec, rec := genJob(jobs, id)
		cancelAfter := time.Duration(-1)
		if jobs.IntN(100) < 20 {
			cancelAfter = time.Duration(jobs.Int64N(int64(4 * time.Second)))
		}
		pause := time.Duration(200+jobs.IntN(800)) * time.Millisecond
		rec.Submitted = time.Now().UnixNano()
		w.mu.Lock()
		w.jobs[id] = &rec
		w.order = append(w.order, id)
		w.mu.Unlock()
		if !w.submit(id, spec, pick, stop) {
			return
		}
		live = append(live, id)
		if cancelAfter >= 0 {
			cancels.Add(1)
			crng := rand.New(rand.NewPCG(w.seed, uint64(n)<<8|uint64(k)))
			go func() {
				defer cancels.Done()
				if sleepOrStop(cancelAfter, stop) {
					w.cancel(id, crng, stop)
				}
			}()
		}
		sleepOrStop(pause, submitting)
	}
}

// submit PUTs the job until a master acknowledges it, each try at a master
// picked at random. It returns false if stop closed first.
func (w *workload) submit(id string, spec []byte, pick *rand.Rand, stop <-chan struct{}) bool {
	for try := 0; ; try++ {
		if closed(stop) {
			return false
		}
		cl := w.masters[pick.IntN(len(w.masters))]
		_, err := cl.SubmitJob(context.Background(), id, spec)
		var api *client.APIError
		switch {
		case err == nil:
			w.mu.Lock()
			w.jobs[id].Acked = true
			w.mu.Unlock()
			return true
		case errors.As(err, &api) && api.StatusCode == http.StatusConflict:
			// The same spec under the same id: only a lost or duplicated
			// job can make a master see a different one.
			w.mu.Lock()
			w.jobs[id].Conflicts++
			w.mu.Unlock()
			w.logf("workload: submit %s (try %d): %v", id, try, err)
			return true
		case errors.As(err, &api) && api.StatusCode < 500:
			w.mu.Lock()
			w.harness = append(w.harness, fmt.Sprintf("submit %s: %v", id, err))
			w.mu.Unlock()
			return true
		}
		w.noteErr(err)
		sleepOrStop(time.Duration(50+pick.IntN(200))*time.Millisecond, stop)
	}
}

// cancel cancels a job until a master answers 202.
func (w *workload) cancel(id string, pick *rand.Rand, stop <-chan struct{}) {
	for !closed(stop) {
		m := pick.IntN(len(w.masters))
		err := w.masters[m].CancelJob(context.Background(), id)
		if err == nil {
			w.mu.Lock()
			w.jobs[id].CancelAcked = time.Now().UnixMilli()
			w.mu.Unlock()
			return
		}
		if client.IsNotFound(err) {
			w.notFound(id, m, err)
			return
		}
		w.noteErr(err)
		sleepOrStop(time.Duration(50+pick.IntN(200))*time.Millisecond, stop)
	}
}

// notFound records a 404 for an acknowledged job from master m.
func (w *workload) notFound(id string, m int, err error) {
	w.mu.Lock()
	w.notFounds = append(w.notFounds, NotFound{Job: id, Master: w.ids[m], At: time.Now().UnixNano()})
	w.mu.Unlock()
	w.logf("workload: %s answered 404 for acknowledged job %s: %v", w.ids[m], id, err)
}

// stillLive drops the jobs a master now shows terminal.
func (w *workload) stillLive(ids []string, pick *rand.Rand) []string {
	var out []string
	for _, id := range ids {
		m := pick.IntN(len(w.masters))
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		j, err := w.masters[m].Job(ctx, id)
		cancel()
		if client.IsNotFound(err) {
			w.notFound(id, m, err)
		}
		if err == nil && terminalStatus(j.Status) {
			continue
		}
		out = append(out, id)
	}
	return out
}
