package master

import (
	"github.com/prometheus/client_golang/prometheus"

	"jobmaster/fsm"
	"jobmaster/leader"
	"jobmaster/metrics"
)

// stateCollector reads, when scraped, the gauges that come from the
// replicated state (every master has them), from Raft, and from the
// leader's executor table (only the leader has one).
type stateCollector struct{ m *Master }

func desc(name, help string, labels ...string) *prometheus.Desc {
	return prometheus.NewDesc(prometheus.BuildFQName(metrics.Namespace, "", name), help, labels, nil)
}

var (
	descJobs           = desc("jobs", "Jobs in the state, by status.", "status")
	descExecutions     = desc("executions", "Executions in the state (current attempts and those not yet replaced), by state.", "state")
	descSpecBytes      = desc("job_spec_bytes", "The footprint of the job specs in the state, as --max-spec-bytes counts it.")
	descPartitions     = desc("partitions", "Result partitions the state tracks.")
	descPartitionBytes = desc("partition_bytes", "Bytes in the result partitions the state tracks.")
	descToken          = desc("fencing_token", "The current epoch: the fencing token of the newest leader.")
	descApplied        = desc("raft_applied_index", "The last Raft log index this master applied.")
	descTerm           = desc("raft_term", "This master's current Raft term.")
	descLeaderInfo     = desc("leader_info", "1, labelled with the leader this master knows (absent when it knows none).", "leader")
	descIsLeader       = desc("is_leader", "1 while this master leads with an established epoch, else 0.")
	descExecutors      = desc("executors", "Executors in the leader's table, by liveness (the leader only).", "status")
	descSlots          = desc("slots", "Slots of the executors in the leader's table that are not lost (the leader only).")
	descSlotsFree      = desc("slots_free", "Free slots of those executors (the leader only).")
	descEventsOldest   = desc("events_oldest_index", "The oldest index an event stream can resume from on this master.")
	descEventsHeld     = desc("events_held", "Events this master holds for its event stream.")
)

func (c *stateCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descJobs, descExecutions, descSpecBytes, descPartitions, descPartitionBytes, descToken, descApplied,
		descTerm, descLeaderInfo, descIsLeader, descExecutors, descSlots, descSlotsFree, descEventsOldest, descEventsHeld} {
		ch <- d
	}
}

func (c *stateCollector) Collect(ch chan<- prometheus.Metric) {
	m := c.m
	gauge := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
	}
	var census fsm.Census
	var token, applied uint64
	var specBytes int64
	var used map[string][]int
	m.fsm.Read(func(st *fsm.State) {
		census = st.Census()
		specBytes = st.SpecBytes()
		token, applied = st.Epoch(), st.Index()
		used = st.UsedSlots()
	})
	for _, s := range fsm.JobStatuses {
		gauge(descJobs, float64(census.Jobs[s]), string(s))
	}
	for _, s := range fsm.ExecutionStates {
		gauge(descExecutions, float64(census.Executions[s]), string(s))
	}
	gauge(descSpecBytes, float64(specBytes))
	gauge(descPartitions, float64(census.Partitions))
	gauge(descPartitionBytes, float64(census.PartitionBytes))
	gauge(descToken, float64(token))
	gauge(descApplied, float64(applied))
	gauge(descTerm, float64(m.raft.CurrentTerm()))
	if _, id := m.raft.LeaderWithID(); id != "" {
		gauge(descLeaderInfo, 1, string(id))
	}
	oldest, held := m.fsm.OldestEvents()
	gauge(descEventsOldest, float64(oldest))
	gauge(descEventsHeld, float64(held))
	s := m.currentSession()
	if s == nil {
		gauge(descIsLeader, 0)
		return
	}
	gauge(descIsLeader, 1)
	byStatus := map[string]int{}
	slots, free := 0, 0
	for _, x := range s.tracker.core.Executors(used, nil, m.cfg.Now()) {
		byStatus[x.Status]++
		if x.Status != string(leader.Lost) {
			slots += x.Slots
			free += x.FreeSlots
		}
	}
	for _, st := range []leader.Status{leader.Alive, leader.Suspect, leader.Lost} {
		gauge(descExecutors, float64(byStatus[string(st)]), string(st))
	}
	gauge(descSlots, float64(slots))
	gauge(descSlotsFree, float64(free))
}
