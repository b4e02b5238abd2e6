package placement

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"jobmaster/fsm"
)

func region(job string, r int, keys ...fsm.SlotNeed) fsm.ReadyRegion {
	return fsm.ReadyRegion{Job: job, Region: r, Keys: keys, Executions: len(keys)}
}

func need(group string, i int) fsm.SlotNeed { return fsm.SlotNeed{Group: group, Index: i} }

func TestPlanSpreadsAcrossExecutors(t *testing.T) {
	p := Plan([]fsm.ReadyRegion{region("a", 0, need("g", 0), need("g", 1), need("g", 2), need("g", 3))},
		[]Executor{{ID: "e1", Slots: 2}, {ID: "e2", Slots: 2}})
	require.Len(t, p, 1)
	require.Equal(t, []fsm.SlotAssign{
		{Group: "g", Index: 0, Executor: "e1", Slot: 0},
		{Group: "g", Index: 1, Executor: "e2", Slot: 0},
		{Group: "g", Index: 2, Executor: "e1", Slot: 1},
		{Group: "g", Index: 3, Executor: "e2", Slot: 1},
	}, p[0].Slots)
}

// Pack fills the executor with the fewest free slots first (ties by id):
// a job of four on executors of 2 and 3 free takes e1's 2, then e2's; the
// next job goes where the fewest are left.
func TestPlanPackFillsExecutorsOneAfterAnother(t *testing.T) {
	exs := []Executor{{ID: "e1", Slots: 2}, {ID: "e2", Slots: 3}, {ID: "e3", Slots: 3}}
	p := PlanBy(Pack, []fsm.ReadyRegion{
		region("a", 0, need("g", 0), need("g", 1), need("g", 2)),
		region("b", 0, need("g", 0)),
	}, exs)
	require.Len(t, p, 2)
	require.Equal(t, []fsm.SlotAssign{
		{Group: "g", Index: 0, Executor: "e1", Slot: 0},
		{Group: "g", Index: 1, Executor: "e1", Slot: 1},
		{Group: "g", Index: 2, Executor: "e2", Slot: 0},
	}, p[0].Slots)
	require.Equal(t, []fsm.SlotAssign{{Group: "g", Index: 0, Executor: "e2", Slot: 1}}, p[1].Slots, "e2 has 2 left, e3 3")
	for _, name := range []string{"spread", "pack"} {
		pol, err := ParsePolicy(name)
		require.NoError(t, err)
		require.Equal(t, name, pol.String())
	}
	_, err := ParsePolicy("binpack")
	require.ErrorContains(t, err, `unknown placement policy "binpack": use spread or pack`)
}

func TestPlanIsAllOrNothingAndSkipsWhatDoesNotFit(t *testing.T) {
	p := Plan([]fsm.ReadyRegion{
		region("big", 0, need("g", 0), need("g", 1), need("g", 2)),
		region("small", 0, need("g", 0)),
	}, []Executor{{ID: "e1", Slots: 2, Used: []int{0}}, {ID: "e2", Slots: 1}})
	require.Len(t, p, 1, "big needs 3 slots, 2 are free")
	require.Equal(t, "small", p[0].Job)
	require.Equal(t, fsm.SlotAssign{Group: "g", Index: 0, Executor: "e1", Slot: 1}, p[0].Slots[0])
}

func TestPlanReusesHeldSlots(t *testing.T) {
	held := fsm.SlotNeed{Group: "g", Index: 0, Held: true, Executor: "e9", Slot: 3}
	p := Plan([]fsm.ReadyRegion{
		region("a", 1, held, need("g", 1)),
		region("a", 2, need("g", 1), need("h", 0)),
	}, []Executor{{ID: "e1", Slots: 2}})
	require.Len(t, p, 2)
	require.Equal(t, fsm.SlotAssign{Group: "g", Index: 0, Executor: "e9", Slot: 3}, p[0].Slots[0], "held key stays put")
	require.Equal(t, p[0].Slots[1].Slot, p[1].Slots[0].Slot, "a key placed earlier in the plan is shared")
	require.Equal(t, "e1", p[1].Slots[1].Executor)
}

func TestPlanNoExecutors(t *testing.T) {
	require.Empty(t, Plan([]fsm.ReadyRegion{region("a", 0, need("g", 0))}, nil))
}

func TestPlanIsValidForTheFSM(t *testing.T) {
	// Every placement of a plan is accepted by the FSM, and no slot is
	// handed out twice.
	s := fsm.NewState()
	idx := uint64(1)
	s.ApplyEntry(idx, fsm.MustEncode(&fsm.EstablishLeadership{Node: "m"}))
	token := s.Epoch()
	for i := 0; i < 20; i++ {
		idx++
		spec := fmt.Sprintf(`{"vertices":[{"id":"a","parallelism":%d,"command":["x"]},{"id":"b","parallelism":3,"command":["x"],"slot_sharing_group":"o"}]}`, 1+i%4)
		sp := mustSpec(t, spec)
		r := s.ApplyEntry(idx, fsm.MustEncode(&fsm.SubmitJob{Fenced: fsm.Fenced{Token: token}, ID: fmt.Sprintf("j%d", i), Spec: sp}))
		require.NoError(t, r[0].Err)
	}
	executors := []Executor{{ID: "e1", Slots: 7}, {ID: "e2", Slots: 5}, {ID: "e3", Slots: 9}}
	plan := Plan(s.ReadyRegions(), executors)
	require.NotEmpty(t, plan)
	seen := map[string]string{}
	for _, p := range plan {
		idx++
		r := s.ApplyEntry(idx, fsm.MustEncode(&fsm.PlaceRegion{Fenced: fsm.Fenced{Token: token}, Job: p.Job, Region: p.Region, Slots: p.Slots}))
		require.NoError(t, r[0].Err, "%s/%d", p.Job, p.Region)
		for _, a := range p.Slots {
			at := fmt.Sprintf("%s/%d", a.Executor, a.Slot)
			owner := fmt.Sprintf("%s/%s/%d", p.Job, a.Group, a.Index)
			if prev, ok := seen[at]; ok {
				require.Equal(t, prev, owner, "slot %s handed out twice", at)
			}
			seen[at] = owner
		}
	}
	used := 0
	for _, l := range s.UsedSlots() {
		used += len(l)
	}
	require.Equal(t, len(seen), used)
	require.LessOrEqual(t, used, 21)
}

// An executor restarted with fewer slots while its old executions still
// hold slot numbers above them takes only what its count leaves: 4 slots
// with 2 held (numbers 5 and 6) take 2 more, not 4. The leader's free
// count (slots less those in use) says the same.
func TestPlanCountsSlotsHeldAboveTheExecutorsCount(t *testing.T) {
	exs := []Executor{{ID: "e1", Slots: 4, Used: []int{5, 6}}}
	require.Empty(t, Plan([]fsm.ReadyRegion{region("big", 0, need("g", 0), need("g", 1), need("g", 2))}, exs),
		"3 keys placed on an executor running 2 of its 4 slots")
	p := Plan([]fsm.ReadyRegion{region("small", 0, need("g", 0), need("g", 1))}, exs)
	require.Len(t, p, 1)
	require.Equal(t, []fsm.SlotAssign{{Group: "g", Index: 0, Executor: "e1", Slot: 0}, {Group: "g", Index: 1, Executor: "e1", Slot: 1}}, p[0].Slots)
}
