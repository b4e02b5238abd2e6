package master

import (
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"jobmaster/acl"
	"jobmaster/buildinfo"
	"jobmaster/fsm"
	"jobmaster/leader"
	"jobmaster/metrics"
	"jobmaster/wire"
)

// masterMetrics is what a master serves on GET /v1/metrics
// (docs/operations.md, "Metrics"): counters of what its leader sessions did,
// counted from the Tally of every Ready carried out and from the requests
// sent to executors, and gauges read from the state and the leader's
// executor table when scraped (stateCollector).
type masterMetrics struct {
	reg  *prometheus.Registry
	http *metrics.HTTP

	reconcile         *prometheus.CounterVec
	regionsPlaced     prometheus.Counter
	executionsPlaced  prometheus.Counter
	deploys           prometheus.Counter
	deployFailures    prometheus.Counter
	deployTasks       prometheus.Counter
	restarts          *prometheus.CounterVec
	executorsLost     prometheus.Counter
	heartbeatRTT      prometheus.Histogram
	heartbeatFailures *prometheus.CounterVec
	sessions          prometheus.Counter
	successions       *prometheus.CounterVec
	relayBatches      *prometheus.CounterVec
	relaySubmissions  prometheus.Counter
}

// Reconciliation actions, the values of the action label.
const (
	actionUnknownCancelled  = "unknown_cancelled"
	actionMissingFailed     = "missing_failed"
	actionDeployExpired     = "deploy_expired"
	actionRedeployed        = "redeployed"
	actionPartitionReleased = "partition_released"
	actionPartitionLost     = "partition_lost"
)

func newMasterMetrics(m *Master) *masterMetrics {
	reg := metrics.NewRegistry(buildinfo.Read(wire.Version, fsm.SnapshotFormat, int(fsm.LastCommandType)))
	ns := metrics.Namespace
	counter := func(name, help string) prometheus.Counter {
		return prometheus.NewCounter(prometheus.CounterOpts{Namespace: ns, Name: name, Help: help})
	}
	x := &masterMetrics{
		reg: reg,
		http: metrics.NewHTTP(reg, func(r *http.Request) bool {
			// A stream lasts as long as its reader; a log as its executor
			// takes to answer, and its task to end when followed.
			return r.Pattern == eventsPath || r.Pattern == acl.LogsPattern
		}),
		reconcile: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Name: "reconcile_actions_total",
			Help: "What the leader's reconciliation of executor reports did, by action."}, []string{"action"}),
		regionsPlaced:    counter("placements_total", "Pipelined regions placed onto executor slots (committed)."),
		executionsPlaced: counter("executions_placed_total", "Executions placed onto executor slots (committed)."),
		deploys:          counter("deploy_requests_total", "Deploy requests sent to executors."),
		deployFailures:   counter("deploy_request_failures_total", "Deploy requests that got no answer or an error (the reconciler retries them)."),
		deployTasks:      counter("deployed_tasks_total", "Tasks carried by the deploy requests sent."),
		restarts: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Name: "restarts_total",
			Help: "Failures that a job's restart strategy answered with a restart, by the kind of failure."}, []string{"reason"}),
		executorsLost: counter("executors_lost_total", "Executors declared lost with work on them (executor-lost committed)."),
		heartbeatRTT: prometheus.NewHistogram(prometheus.HistogramOpts{Namespace: ns, Name: "executor_heartbeat_seconds",
			Help:    "Round-trip time of the heartbeats executors answered.",
			Buckets: []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2}}),
		heartbeatFailures: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Name: "executor_heartbeat_failures_total",
			Help: "Heartbeats that got no usable answer, by the status the leader gave the executor then."}, []string{"status"}),
		sessions: counter("leader_sessions_total", "Leader sessions this master established (epochs it committed)."),
		relayBatches: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Name: "relay_batches_total",
			Help: "Batches of submissions this master relayed to the leader, by outcome: answered, or failed (no answer: each submission waits for the next leader and goes again)."}, []string{"outcome"}),
		relaySubmissions: counter("relayed_submissions_total", "Submissions this master relayed to the leader (in relay_batches_total)."),
		successions: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Name: "successions_total",
			Help: "Times this master found its leader's process gone (its Raft port refused a connection), by what it did: stood for election, deferred to a survivor whose log is ahead, or neither (no quorum answered)."}, []string{"decision"}),
	}
	for _, a := range []string{actionUnknownCancelled, actionMissingFailed, actionDeployExpired, actionRedeployed, actionPartitionReleased, actionPartitionLost} {
		x.reconcile.WithLabelValues(a)
	}
	for _, r := range []string{fsm.ReasonTaskFailed, fsm.ReasonTaskCanceled, fsm.ReasonMissing, fsm.ReasonDeployExpired, fsm.ReasonExecutorLost, fsm.ReasonPartitionLost, fsm.ReasonDrain, fsm.ReasonLeaseExpired} {
		x.restarts.WithLabelValues(r)
	}
	for _, o := range []string{"answered", "failed"} {
		x.relayBatches.WithLabelValues(o)
	}
	for _, d := range []string{"stood", "deferred", "no_quorum"} {
		x.successions.WithLabelValues(d)
	}
	for _, s := range []leader.Status{leader.Alive, leader.Suspect, leader.Lost} {
		x.heartbeatFailures.WithLabelValues(string(s))
	}
	reg.MustRegister(x.reconcile, x.regionsPlaced, x.executionsPlaced, x.deploys, x.deployFailures, x.deployTasks,
		x.restarts, x.executorsLost, x.heartbeatRTT, x.heartbeatFailures, x.sessions, x.successions, x.relayBatches, x.relaySubmissions, &stateCollector{m: m})
	return x
}

// count adds up what a Ready carried out did.
func (x *masterMetrics) count(t leader.Tally) {
	add := func(c prometheus.Counter, n int) {
		if n > 0 {
			c.Add(float64(n))
		}
	}
	add(x.reconcile.WithLabelValues(actionUnknownCancelled), t.UnknownCancelled)
	add(x.reconcile.WithLabelValues(actionMissingFailed), t.MissingFailed)
	add(x.reconcile.WithLabelValues(actionDeployExpired), t.DeploysExpired)
	add(x.reconcile.WithLabelValues(actionRedeployed), t.Redeployed)
	add(x.reconcile.WithLabelValues(actionPartitionReleased), t.PartitionsReleased)
	add(x.reconcile.WithLabelValues(actionPartitionLost), t.PartitionsLost)
	add(x.regionsPlaced, t.RegionsPlaced)
	add(x.executionsPlaced, t.ExecutionsPlaced)
	add(x.executorsLost, t.ExecutorsLost)
	for reason, n := range t.Restarts {
		add(x.restarts.WithLabelValues(reason), n)
	}
}

// heartbeat records one heartbeat: answered after rtt, or failed while the
// executor had the given status.
func (x *masterMetrics) heartbeat(rtt time.Duration, failed bool, status leader.Status) {
	if failed {
		x.heartbeatFailures.WithLabelValues(string(status)).Inc()
		return
	}
	x.heartbeatRTT.Observe(rtt.Seconds())
}

// deploy records one deploy request of tasks tasks.
func (x *masterMetrics) deploy(tasks int, failed bool) {
	x.deploys.Inc()
	x.deployTasks.Add(float64(tasks))
	if failed {
		x.deployFailures.Inc()
	}
}

// relayed records a batch of n submissions relayed to the leader.
func (x *masterMetrics) relayed(n int, failed bool) {
	outcome := "answered"
	if failed {
		outcome = "failed"
	}
	x.relayBatches.WithLabelValues(outcome).Inc()
	x.relaySubmissions.Add(float64(n))
}
