package executor

import (
	"container/heap"
	"fmt"
	"strconv"
	"sync"
	"time"

	"jobmaster/wire"
)

// Task environment variables the sim runtime reads.
const (
	SimDurationEnv = "SIM_DURATION"  // Go duration, default 0
	SimExitCodeEnv = "SIM_EXIT_CODE" // integer, default 0
)

// simRuntime runs no processes: each task is an entry in a heap ordered by
// due time, and one goroutine ends the due ones. Thousands of tasks cost
// one goroutine and one timer.
type simRuntime struct {
	now    func() time.Time
	onExit func(id string, res exitResult)

	mu     sync.Mutex
	tasks  simHeap
	byID   map[string]*simEntry
	closed bool

	wake chan struct{}
	quit chan struct{}
	done chan struct{}
	once sync.Once
}

type simEntry struct {
	id    string
	due   time.Time
	code  int
	index int
}

func newSimRuntime(now func() time.Time, onExit func(string, exitResult)) *simRuntime {
	r := &simRuntime{
		now:    now,
		onExit: onExit,
		byID:   make(map[string]*simEntry),
		wake:   make(chan struct{}, 1),
		quit:   make(chan struct{}),
		done:   make(chan struct{}),
	}
	go r.loop()
	return r
}

// simParams reads a task's simulated duration and exit code.
func simParams(env map[string]string) (time.Duration, int, error) {
	var d time.Duration
	var code int
	var err error
	if s, ok := env[SimDurationEnv]; ok {
		if d, err = time.ParseDuration(s); err != nil || d < 0 {
			return 0, 0, fmt.Errorf("%s=%q: want a non-negative Go duration", SimDurationEnv, s)
		}
	}
	if s, ok := env[SimExitCodeEnv]; ok {
		if code, err = strconv.Atoi(s); err != nil {
			return 0, 0, fmt.Errorf("%s=%q: want an integer", SimExitCodeEnv, s)
		}
	}
	if s, ok := env[SimFetchEnv]; ok {
		if _, err := strconv.ParseBool(s); err != nil {
			return 0, 0, fmt.Errorf("%s=%q: want true or false", SimFetchEnv, s)
		}
	}
	return d, code, nil
}

func (r *simRuntime) start(t wire.Task) error {
	d, code, err := simParams(t.Env)
	if err != nil {
		return err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return errRuntimeClosed
	}
	if _, ok := r.byID[t.ExecutionID]; ok {
		return fmt.Errorf("execution %s is already running", t.ExecutionID)
	}
	st := &simEntry{id: t.ExecutionID, due: r.now().Add(d), code: code}
	heap.Push(&r.tasks, st)
	r.byID[st.id] = st
	select {
	case r.wake <- struct{}{}:
	default:
	}
	return nil
}

// stop ends a task at once (as if it died of SIGTERM).
func (r *simRuntime) stop(id string) {
	r.mu.Lock()
	st, ok := r.byID[id]
	if ok {
		heap.Remove(&r.tasks, st.index)
		delete(r.byID, id)
	}
	r.mu.Unlock()
	if ok {
		r.onExit(id, exitResult{Code: 128 + 15})
	}
}

func (r *simRuntime) kill(id string) { r.stop(id) }

// close drops every task without reporting it and stops the loop.
func (r *simRuntime) close() {
	r.once.Do(func() {
		r.mu.Lock()
		r.closed = true
		r.tasks = nil
		r.byID = make(map[string]*simEntry)
		r.mu.Unlock()
		close(r.quit)
	})
	<-r.done
}

func (r *simRuntime) loop() {
	defer close(r.done)
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		var due []*simEntry
		wait := time.Hour
		r.mu.Lock()
		now := r.now()
		for len(r.tasks) > 0 && !r.tasks[0].due.After(now) {
			st := heap.Pop(&r.tasks).(*simEntry)
			delete(r.byID, st.id)
			due = append(due, st)
		}
		if len(r.tasks) > 0 {
			wait = r.tasks[0].due.Sub(now)
		}
		r.mu.Unlock()
		for _, st := range due {
			r.onExit(st.id, exitResult{Code: st.code})
		}
		timer.Reset(wait)
		select {
		case <-r.quit:
			return
		case <-r.wake:
		case <-timer.C:
		}
	}
}

// simHeap orders tasks by due time.
type simHeap []*simEntry

func (h simHeap) Len() int           { return len(h) }
func (h simHeap) Less(i, j int) bool { return h[i].due.Before(h[j].due) }
func (h simHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].index = i
	h[j].index = j
}
func (h *simHeap) Push(x any) {
	st := x.(*simEntry)
	st.index = len(*h)
	*h = append(*h, st)
}
func (h *simHeap) Pop() any {
	old := *h
	n := len(old)
	st := old[n-1]
	old[n-1] = nil
	*h = old[:n-1]
	return st
}
