package fsm

// slotTable maps a logical slot (job, slot sharing group, subtask index) to
// the executor slot a live execution holds for it: per job and group, a
// dense slice indexed by subtask. With every subtask of a million placed, a
// map keyed by slotKey cost about 90 bytes per execution, the largest of
// the derived indexes; a slice entry costs 24. Empty groups and jobs are
// dropped, so that a table rebuilt on restore equals the one kept by
// applying.
type slotTable map[string]map[string]*groupSlots // job -> group -> slots

// groupSlots are the held slots of one group of a job.
type groupSlots struct {
	job, group string    // whose they are (executors' slot uses point here)
	refs       []slotRef // by subtask index; "" executor: none
	held       int       // entries set
}

// get returns the slot held for k, if any.
func (t slotTable) get(k slotKey) (slotRef, bool) {
	g := t[k.job][k.group]
	if g == nil || k.index < 0 || k.index >= len(g.refs) || g.refs[k.index].executor == "" {
		return slotRef{}, false
	}
	return g.refs[k.index], true
}

// set records that ref holds k and returns k's group; width is the number
// of subtask indexes of k's group (the largest parallelism among its
// vertices), so that a group's slice has the same length however the table
// was built.
func (t slotTable) set(k slotKey, ref slotRef, width int) *groupSlots {
	groups := t[k.job]
	if groups == nil {
		groups = make(map[string]*groupSlots, 1)
		t[k.job] = groups
	}
	g := groups[k.group]
	if g == nil {
		g = &groupSlots{job: k.job, group: k.group, refs: make([]slotRef, max(width, k.index+1))}
		groups[k.group] = g
	}
	if g.refs[k.index].executor == "" {
		g.held++
	}
	g.refs[k.index] = ref
	return g
}

// del forgets the slot held for k.
func (t slotTable) del(k slotKey) {
	groups := t[k.job]
	g := groups[k.group]
	if g == nil || k.index < 0 || k.index >= len(g.refs) || g.refs[k.index].executor == "" {
		return
	}
	g.refs[k.index] = slotRef{}
	if g.held--; g.held > 0 {
		return
	}
	delete(groups, k.group)
	if len(groups) == 0 {
		delete(t, k.job)
	}
}

// groupWidth is the number of subtask indexes of a slot sharing group of j:
// the largest parallelism among its vertices.
func groupWidth(j *Job, group string) int {
	w := 0
	for i := range j.Spec.Vertices {
		if v := &j.Spec.Vertices[i]; v.SlotSharingGroup == group {
			w = max(w, v.Parallelism)
		}
	}
	return w
}
