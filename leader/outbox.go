package leader

import (
	"sync"

	"jobmaster/fsm"
)

// Outbox gathers deployments per executor across scheduling passes: at most
// one deploy request is in flight to an executor, and what is placed there
// meanwhile waits and goes as one deployment when the answer has come.
// Passes that each place a few tasks on many executors (many small jobs)
// then cost one request and one answer commit per executor for every round
// trip, rather than one per pass.
//
// An Outbox decides nothing about where tasks run and does no I/O: the
// caller sends what Add and Sent return and tells Sent when a deployment's
// answer (or failure) is in. Every deployment is sent under the session's
// token like any other: an outbox lives for one session, as the Core does.
//
// Holding a task back delays only its first send; it changes no rule of
// the reconciler. A task held here is PENDING in the state, so it is never
// missing, it is deployed again by a report while its ack deadline runs
// (Redeploy), and its deadline counts from its placement.
//
// A task is never sent while a deployment that carries it is in flight:
// a report that arrives before that deployment (a heartbeat overtakes it
// on another connection, or the executor answers the heartbeat first)
// does not list it, and the reconciler deploys it again; that second copy
// is held back here, and sent only if the deployment in flight fails
// (Failed), at once, as it was before. In a burst of 1,000 small jobs on 100 executors a
// tenth of the tasks went twice before. An Outbox is safe for concurrent
// use.
type Outbox struct {
	mu sync.Mutex
	// busy holds the executors with a deployment in flight.
	busy map[string]*flight
}

// flight is an executor's deployment in flight: the ids it carries, the
// deployment gathered to follow it (nil if none yet), and the tasks left
// out of that because the deployment in flight carries them (sent again
// if it fails: Failed).
type flight struct {
	sent    map[string]bool
	next    *gathered
	dropped map[string]fsm.TaskSpec
}

// gathered is a deployment waiting for its executor's answer: its tasks in
// order, and the ids they carry (a task queued twice, say placed and then
// redeployed by a report, goes once).
type gathered struct {
	d   Deploy
	ids map[string]bool
}

// NewOutbox returns an empty outbox.
func NewOutbox() *Outbox {
	return &Outbox{busy: make(map[string]*flight)}
}

// Add takes deployments to send and returns those to send now, in order:
// the ones to executors with nothing in flight (which now have). The
// others are gathered behind the deployment in flight to their executor,
// without the tasks that deployment carries. Deployments in ds to the same
// executor are merged, and a task goes once: dropped counts the tasks left
// out as already on their way or already queued.
func (o *Outbox) Add(ds []Deploy) (now []Deploy, dropped int) {
	if len(ds) == 0 {
		return nil, 0
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	at := make(map[string]int) // executor -> index in now, for this call
	for _, d := range ds {
		n := len(d.Tasks)
		if n == 0 {
			continue
		}
		// into is where d's tasks go, seen the ids already there.
		var into *Deploy
		var seen map[string]bool
		if i, ok := at[d.Executor]; ok {
			into, seen = &now[i], o.busy[d.Executor].sent
		} else if f, inFlight := o.busy[d.Executor]; !inFlight {
			f = &flight{sent: make(map[string]bool, len(d.Tasks))}
			o.busy[d.Executor] = f
			at[d.Executor] = len(now)
			now = append(now, Deploy{Executor: d.Executor, Redeploy: d.Redeploy})
			into, seen = &now[len(now)-1], f.sent
		} else {
			if f.next == nil {
				f.next = &gathered{d: Deploy{Executor: d.Executor, Redeploy: true}, ids: make(map[string]bool)}
			}
			d = f.without(d)
			dropped += n - len(d.Tasks)
			n = len(d.Tasks)
			into, seen = &f.next.d, f.next.ids
		}
		before := len(into.Tasks)
		*into = merged(*into, d, seen)
		dropped += n - (len(into.Tasks) - before)
	}
	return now, dropped
}

// Sent records that the deployment in flight to executor has been answered
// or has failed. It returns the deployment gathered behind it, to send now
// (ok), or clears the executor's flight if nothing waits.
func (o *Outbox) Sent(executor string) (next Deploy, ok bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	f, inFlight := o.busy[executor]
	if !inFlight {
		return Deploy{}, false
	}
	if f.next == nil || len(f.next.d.Tasks) == 0 {
		delete(o.busy, executor)
		return Deploy{}, false
	}
	o.busy[executor] = &flight{sent: f.next.ids}
	return f.next.d, true
}

// InFlight is the number of executors with a deployment in flight.
func (o *Outbox) InFlight() int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return len(o.busy)
}

// without is d without the tasks the deployment in flight carries (d
// itself when it has none of them); it keeps those it leaves out.
func (f *flight) without(d Deploy) Deploy {
	var kept []fsm.TaskSpec
	for i, ts := range d.Tasks {
		if !f.sent[ts.Execution.ID] {
			if kept != nil {
				kept = append(kept, ts)
			}
			continue
		}
		if kept == nil {
			kept = append(make([]fsm.TaskSpec, 0, len(d.Tasks)), d.Tasks[:i]...)
		}
		if f.dropped == nil {
			f.dropped = make(map[string]fsm.TaskSpec)
		}
		f.dropped[ts.Execution.ID] = ts
	}
	if kept != nil {
		d.Tasks = kept
	}
	return d
}

// Failed records that the deployments of ids to executor got no answer
// (the request failed): the tasks among them that Add left out while they
// were in flight join the deployment gathered behind, so that Sent hands
// them out at once, as a redeployment. It returns how many.
func (o *Outbox) Failed(executor string, ids []string) (resent int) {
	o.mu.Lock()
	defer o.mu.Unlock()
	f := o.busy[executor]
	if f == nil || len(f.dropped) == 0 {
		return 0
	}
	for _, id := range ids {
		ts, ok := f.dropped[id]
		if !ok {
			continue
		}
		delete(f.dropped, id)
		if f.next == nil {
			f.next = &gathered{d: Deploy{Executor: executor, Redeploy: true}, ids: make(map[string]bool)}
		}
		if !f.next.ids[id] {
			f.next.ids[id] = true
			f.next.d.Tasks = append(f.next.d.Tasks, ts)
			resent++
		}
	}
	return resent
}

// merged appends d's tasks to into's, leaving out those whose ids seen
// holds (and adding the others to it, when it is not nil). The result is a
// redeployment only if both were.
func merged(into, d Deploy, seen map[string]bool) Deploy {
	for _, ts := range d.Tasks {
		if seen != nil {
			if seen[ts.Execution.ID] {
				continue
			}
			seen[ts.Execution.ID] = true
		}
		into.Tasks = append(into.Tasks, ts)
	}
	into.Redeploy = into.Redeploy && d.Redeploy
	return into
}
