package leader

import (
	"testing"
	"time"

	"jobmaster/fsm"
	"jobmaster/jobspec"
	"jobmaster/wire"
)

// world is a state and one session's core over it, for the tests of this
// package; the scenario tests (package scenario) drive the same core
// through whole stories.
type world struct {
	t    testing.TB
	st   *fsm.State
	core *Core
	now  time.Time
}

func (w *world) read(fn func(*fsm.State)) { fn(w.st) }

// newWorld establishes a leader over a fresh state, with executors of one
// slot each that have answered a heartbeat.
func newWorld(t testing.TB, cfg Config, now time.Time, executors ...string) *world {
	return newWorldSlots(t, cfg, now, 1, executors...)
}

// newWorldSlots is newWorld with executors of the given slots each.
func newWorldSlots(t testing.TB, cfg Config, now time.Time, slots int, executors ...string) *world {
	w := &world{t: t, st: fsm.NewState(), now: now}
	res := w.apply(&fsm.EstablishLeadership{Node: "m1"})
	w.core = New(cfg, res[0].Epoch, now)
	var members []Member
	for _, id := range executors {
		members = append(members, Member{ID: id, Addr: id + ":1", Slots: slots})
	}
	w.core.Refresh(now, members, nil)
	for _, id := range executors {
		h, ok := w.core.Heartbeat(w.read, id, now)
		if !ok {
			t.Fatalf("no heartbeat to %s", id)
		}
		w.commit(w.core.HeartbeatAnswered(w.read, h, &wire.Report{Version: wire.Version, Executor: id, Slots: slots}, now))
	}
	return w
}

func (w *world) apply(cmds ...fsm.Command) []fsm.Result {
	return w.st.ApplyEntry(w.st.Index()+1, fsm.MustEncode(cmds...))
}

// commit carries out r's proposal and returns r completed.
func (w *world) commit(r Ready) Ready {
	if len(r.Propose) == 0 {
		return r
	}
	return w.core.Committed(w.read, r, w.apply(r.Propose...))
}

func (w *world) submit(id, spec string) {
	s, err := jobspec.Parse([]byte(spec))
	if err != nil {
		w.t.Fatal(err)
	}
	if r := w.apply(&fsm.SubmitJob{Fenced: w.core.fenced(w.now), ID: id, Spec: s}); r[0].Err != nil {
		w.t.Fatal(r[0].Err)
	}
}

// schedule runs a scheduling pass and returns the deployments it asks for.
func (w *world) schedule() []Deploy {
	return w.commit(w.core.Schedule(w.read, w.now).Ready).Deploy
}
