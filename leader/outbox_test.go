package leader

import (
	"reflect"
	"testing"

	"jobmaster/fsm"
)

func deployOf(executor string, redeploy bool, ids ...string) Deploy {
	d := Deploy{Executor: executor, Redeploy: redeploy}
	for _, id := range ids {
		d.Tasks = append(d.Tasks, fsm.TaskSpec{Execution: fsm.Execution{ID: id, Executor: executor}})
	}
	return d
}

// add is Outbox.Add without the count of tasks dropped.
func add(o *Outbox, ds []Deploy) []Deploy {
	now, _ := o.Add(ds)
	return now
}

func taskIDs(d Deploy) []string {
	var ids []string
	for _, ts := range d.Tasks {
		ids = append(ids, ts.Execution.ID)
	}
	return ids
}

func executorsOf(ds []Deploy) []string {
	var out []string
	for _, d := range ds {
		out = append(out, d.Executor)
	}
	return out
}

// A deployment to an idle executor goes at once; what follows while it is
// in flight is gathered into one deployment, sent when the answer is in.
func TestOutboxGathersBehindTheDeploymentInFlight(t *testing.T) {
	o := NewOutbox()
	now := add(o, []Deploy{deployOf("e1", false, "a"), deployOf("e2", false, "b")})
	if got := executorsOf(now); !reflect.DeepEqual(got, []string{"e1", "e2"}) {
		t.Fatalf("first pass sends %v, want e1 and e2", got)
	}
	// Two more passes place on e1 (busy) and e3 (idle).
	if now := add(o, []Deploy{deployOf("e1", false, "c"), deployOf("e3", false, "d")}); !reflect.DeepEqual(executorsOf(now), []string{"e3"}) {
		t.Fatalf("second pass sends %v, want only e3", executorsOf(now))
	}
	if now := add(o, []Deploy{deployOf("e1", false, "e", "f")}); len(now) != 0 {
		t.Fatalf("third pass sends %v while e1 is busy", executorsOf(now))
	}
	if o.InFlight() != 3 {
		t.Fatalf("in flight: %d executors, want 3", o.InFlight())
	}
	next, ok := o.Sent("e1")
	if !ok || next.Executor != "e1" || !reflect.DeepEqual(taskIDs(next), []string{"c", "e", "f"}) {
		t.Fatalf("after e1's answer: %v %v, want c, e, f to e1", ok, taskIDs(next))
	}
	if next.Redeploy {
		t.Fatal("a gathered deployment of new placements is marked a redeployment")
	}
	// e1's gathered deployment is in flight now; nothing waits behind it.
	if _, ok := o.Sent("e1"); ok {
		t.Fatal("a second answer from e1 sends something")
	}
	if now := add(o, []Deploy{deployOf("e1", false, "g")}); !reflect.DeepEqual(executorsOf(now), []string{"e1"}) {
		t.Fatalf("e1 idle again: %v sent, want e1", executorsOf(now))
	}
	for _, ex := range []string{"e1", "e2", "e3"} {
		if _, ok := o.Sent(ex); ok {
			t.Fatalf("%s: something was gathered", ex)
		}
	}
	if o.InFlight() != 0 {
		t.Fatalf("in flight after every answer: %d", o.InFlight())
	}
}

// A task gathered twice (placed, then redeployed by a report before it was
// sent) goes once; the merge is a redeployment only if every part was.
func TestOutboxSendsAGatheredTaskOnce(t *testing.T) {
	o := NewOutbox()
	add(o, []Deploy{deployOf("e1", false, "a")})
	add(o, []Deploy{deployOf("e1", true, "b")})
	add(o, []Deploy{deployOf("e1", true, "b", "c")})
	next, ok := o.Sent("e1")
	if !ok || !reflect.DeepEqual(taskIDs(next), []string{"b", "c"}) {
		t.Fatalf("gathered %v, want b, c", taskIDs(next))
	}
	if !next.Redeploy {
		t.Fatal("a merge of redeployments is not a redeployment")
	}
	add(o, []Deploy{deployOf("e1", true, "d")})
	add(o, []Deploy{deployOf("e1", false, "e")})
	if next, _ := o.Sent("e1"); next.Redeploy {
		t.Fatal("a merge with new placements is marked a redeployment")
	}
}

// Deployments to one executor in one call go as one; empty ones go not at
// all; an answer from an executor with nothing in flight changes nothing.
func TestOutboxMergesOneCallAndIgnoresEmpty(t *testing.T) {
	o := NewOutbox()
	now := add(o, []Deploy{deployOf("e1", false, "a"), {Executor: "e2"}, deployOf("e1", false, "b")})
	if len(now) != 1 || !reflect.DeepEqual(taskIDs(now[0]), []string{"a", "b"}) {
		t.Fatalf("sent %v, want one deployment of a, b to e1", now)
	}
	if _, ok := o.Sent("e9"); ok {
		t.Fatal("an unknown executor's answer sends something")
	}
	if o.InFlight() != 1 {
		t.Fatalf("in flight: %d, want 1 (e1)", o.InFlight())
	}
	if add(o, nil) != nil {
		t.Fatal("nothing added, something sent")
	}
}

// The caller's slices are not shared: appending to a deployment sent does
// not change one gathered later.
func TestOutboxDoesNotAliasTheCallersTasks(t *testing.T) {
	o := NewOutbox()
	d := deployOf("e1", false, "a")
	d.Tasks = append(make([]fsm.TaskSpec, 0, 4), d.Tasks...)
	now := add(o, []Deploy{d})
	now[0].Tasks = append(now[0].Tasks, fsm.TaskSpec{Execution: fsm.Execution{ID: "x"}})
	if len(d.Tasks) != 1 || len(d.Tasks[:2]) == 2 && d.Tasks[:2][1].Execution.ID == "x" {
		t.Fatal("the deployment sent shares its backing array with the caller's")
	}
}

// A task is not sent again while a deployment that carries it is in
// flight (a report that overtook that deployment redeploys it); once the
// deployment is answered or has failed, a redeployment of it goes.
func TestOutboxDropsTasksInFlight(t *testing.T) {
	o := NewOutbox()
	add(o, []Deploy{deployOf("e1", false, "a", "b")})
	if now, dropped := o.Add([]Deploy{deployOf("e1", true, "a", "c"), deployOf("e1", true, "b")}); len(now) != 0 || dropped != 2 {
		t.Fatalf("sent %v while e1 is busy, dropped %d (want a and b)", now, dropped)
	}
	next, ok := o.Sent("e1")
	if !ok || !reflect.DeepEqual(taskIDs(next), []string{"c"}) {
		t.Fatalf("gathered %v, want only c: a and b were in flight", taskIDs(next))
	}
	// c is in flight now: a redeployment of it alone gathers nothing.
	if _, dropped := o.Add([]Deploy{deployOf("e1", true, "c")}); dropped != 1 {
		t.Fatalf("dropped %d, want c", dropped)
	}
	if next, ok := o.Sent("e1"); ok {
		t.Fatalf("after c's answer, sent %v: c was in flight when it was redeployed", taskIDs(next))
	}
	if o.InFlight() != 0 {
		t.Fatalf("in flight: %d, want none", o.InFlight())
	}
	// The deployment of c failed, say: the next report's redeployment goes.
	now := add(o, []Deploy{deployOf("e1", true, "c")})
	if len(now) != 1 || !reflect.DeepEqual(taskIDs(now[0]), []string{"c"}) || !now[0].Redeploy {
		t.Fatalf("sent %v, want the redeployment of c", now)
	}
	// Within one call to an idle executor, a task goes once.
	o2 := NewOutbox()
	now, dropped := o2.Add([]Deploy{deployOf("e2", false, "x"), deployOf("e2", true, "x", "y")})
	if len(now) != 1 || !reflect.DeepEqual(taskIDs(now[0]), []string{"x", "y"}) || dropped != 1 {
		t.Fatalf("sent %v, dropped %d; want x, y once, the second x dropped", now, dropped)
	}
	// Behind a deployment in flight, a task queued twice is counted once
	// dropped.
	if _, dropped := o2.Add([]Deploy{deployOf("e2", true, "z"), deployOf("e2", true, "z", "x")}); dropped != 2 {
		t.Fatalf("dropped %d, want 2: the second z (queued) and x (in flight)", dropped)
	}
}

// A copy held back because its deployment was in flight goes at once if
// that deployment fails, and only then; the others stay held back.
func TestOutboxSendsWhatWasHeldBackWhenItsDeploymentFails(t *testing.T) {
	o := NewOutbox()
	add(o, []Deploy{deployOf("e1", false, "a", "b")})
	if _, dropped := o.Add([]Deploy{deployOf("e1", true, "a", "b", "c")}); dropped != 2 {
		t.Fatalf("dropped %d, want a and b", dropped)
	}
	if n := o.Failed("e1", []string{"a", "x"}); n != 1 {
		t.Fatalf("resent %d, want a (x was never held back)", n)
	}
	if n := o.Failed("e1", []string{"a"}); n != 0 {
		t.Fatalf("a resent twice: %d", n)
	}
	next, ok := o.Sent("e1")
	if !ok || !reflect.DeepEqual(taskIDs(next), []string{"c", "a"}) || !next.Redeploy {
		t.Fatalf("next %v (ok %v, redeploy %v), want the redeployment of c and a", taskIDs(next), ok, next.Redeploy)
	}
	// b's deployment was answered: what was held back of it is gone.
	if n := o.Failed("e1", []string{"b"}); n != 0 {
		t.Fatalf("b resent after its deployment was answered: %d", n)
	}
	if n := o.Failed("e9", []string{"a"}); n != 0 {
		t.Fatal("an executor with nothing in flight resent something")
	}
	// A failure with nothing gathered behind still sends the held-back
	// copy.
	o2 := NewOutbox()
	add(o2, []Deploy{deployOf("e2", false, "p")})
	add(o2, []Deploy{deployOf("e2", true, "p")})
	o2.Failed("e2", []string{"p"})
	if next, ok := o2.Sent("e2"); !ok || !reflect.DeepEqual(taskIDs(next), []string{"p"}) {
		t.Fatalf("next %v (ok %v), want p again", taskIDs(next), ok)
	}
}
