package executor

import (
	"net/http"

	"github.com/prometheus/client_golang/prometheus"

	"jobmaster/buildinfo"
	"jobmaster/metrics"
	"jobmaster/wire"
)

// executorMetrics is what an executor serves on GET /v1/metrics
// (docs/operations.md, "Metrics"): counters of its own doings, and gauges
// read from the held set, the lease and the partition store when scraped.
type executorMetrics struct {
	reg  *prometheus.Registry
	http *metrics.HTTP

	selfFences   prometheus.Counter
	refusals     *prometheus.CounterVec
	fetchBytes   prometheus.Counter
	fetchErrors  prometheus.Counter
	pushes       prometheus.Counter
	pushFailures prometheus.Counter
	gcDeleted    *prometheus.CounterVec
	gcBytes      prometheus.Counter
	writeFails   *prometheus.CounterVec
}

// What a fencing refusal refused, the values of the request label.
const (
	refusedLeader = "leader" // a deploy, cancel, heartbeat or release
	refusedFetch  = "fetch"  // another executor's fetch of a partition
)

func newExecutorMetrics(e *Executor) *executorMetrics {
	reg := metrics.NewRegistry(buildinfo.Read(wire.Version, 0, 0))
	counter := func(name, help string) prometheus.Counter {
		return prometheus.NewCounter(prometheus.CounterOpts{Namespace: metrics.Namespace, Subsystem: "executor", Name: name, Help: help})
	}
	x := &executorMetrics{
		reg: reg,
		http: metrics.NewHTTP(reg, func(r *http.Request) bool {
			// Followed logs and partitions last as long as what they follow.
			q := r.URL.Query()
			return q.Has("follow") && q.Get("follow") != "0"
		}),
		selfFences: counter("self_fences_total", "Times the lease a leader gave ran out and the executor stopped every task it held."),
		refusals: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: metrics.Namespace, Subsystem: "executor", Name: "fencing_refusals_total",
			Help: "Requests refused for a stale fencing token or a replaced cluster, by what they asked: a leader's request or a fetch."}, []string{"request"}),
		fetchBytes:   counter("fetch_bytes_total", "Bytes of partitions fetched from other executors for this executor's tasks."),
		fetchErrors:  counter("fetch_errors_total", "Fetch attempts that broke off or failed (each is retried until the fetch timeout)."),
		pushes:       counter("pushes_total", "Pushes of state changes to the leader."),
		pushFailures: counter("push_failures_total", "Pushes that failed (the next push or heartbeat carries their changes)."),
		gcDeleted: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: metrics.Namespace, Subsystem: "executor", Name: "gc_deleted_total",
			Help: "Execution directories (working directory and logs) deleted, by reason: age (past --gc-retention), disk (past --gc-disk-limit) or disk_full (less than --disk-reserve free)."}, []string{"reason"}),
		gcBytes: counter("gc_deleted_bytes_total", "Disk space freed by deleting execution directories."),
		writeFails: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: metrics.Namespace, Subsystem: "executor", Name: "storage_write_failures_total",
			Help: "Failed writes of the executor's own files, by file: lease (the shims' deadline) or token (the fencing token)."}, []string{"file"}),
	}
	x.gcDeleted.WithLabelValues(gcByAge)
	x.gcDeleted.WithLabelValues(gcByDisk)
	x.gcDeleted.WithLabelValues(gcByFull)
	x.writeFails.WithLabelValues(fileLease)
	x.writeFails.WithLabelValues(fileToken)
	x.refusals.WithLabelValues(refusedLeader)
	x.refusals.WithLabelValues(refusedFetch)
	reg.MustRegister(x.selfFences, x.refusals, x.fetchBytes, x.fetchErrors, x.pushes, x.pushFailures, x.gcDeleted, x.gcBytes, x.writeFails,
		&executorCollector{e: e})
	return x
}

// fetched counts one fetch attempt.
func (x *executorMetrics) fetched(bytes int64, failed bool) {
	x.fetchBytes.Add(float64(bytes))
	if failed {
		x.fetchErrors.Inc()
	}
}

// executorCollector reads the executor's gauges when scraped.
type executorCollector struct{ e *Executor }

func executorDesc(name, help string, labels ...string) *prometheus.Desc {
	return prometheus.NewDesc(prometheus.BuildFQName(metrics.Namespace, "executor", name), help, labels, nil)
}

var (
	descTasks          = executorDesc("tasks", "Executions held, by state (terminal ones until the leader acknowledges them).", "state")
	descSlots          = executorDesc("slots", "Slots this executor offers (--slots).")
	descSlotsUsed      = executorDesc("slots_used", "Slots live executions use.")
	descLeaseRemaining = executorDesc("lease_remaining_seconds", "Time until the executor stops its tasks unless a leader's heartbeat renews the lease (0 once it has stopped them).")
	descFencingToken   = executorDesc("fencing_token", "The newest fencing token this executor has seen.")
	descPartitions     = executorDesc("partitions", "Result partitions held for consumers.")
	descPartitionBytes = executorDesc("partition_bytes", "Bytes of the result partitions held.")
	descExecBytes      = executorDesc("execution_dir_bytes", "Disk space of the execution directories (working directories and logs) at the last collection.")
	descDiskFull       = executorDesc("disk_full", "1 while the data directory's filesystem is full: the leader places nothing here.")
)

var executorStates = []wire.State{wire.StateDeploying, wire.StateRunning, wire.StateCanceling, wire.StateFinished, wire.StateCanceled, wire.StateFailed}

func (c *executorCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descTasks, descSlots, descSlotsUsed, descLeaseRemaining, descFencingToken, descPartitions, descPartitionBytes, descExecBytes, descDiskFull} {
		ch <- d
	}
}

func (c *executorCollector) Collect(ch chan<- prometheus.Metric) {
	e := c.e
	gauge := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
	}
	now := e.cfg.Now()
	e.mu.Lock()
	byState := make(map[wire.State]int)
	for _, x := range e.held.m {
		byState[x.status.State]++
	}
	used := e.held.usedSlots()
	remaining := e.lease.dur - now.Sub(e.lease.last)
	if e.lease.fenced || remaining < 0 {
		remaining = 0
	}
	token := e.fence.Token
	e.mu.Unlock()
	for _, s := range executorStates {
		gauge(descTasks, float64(byState[s]), string(s))
	}
	gauge(descSlots, float64(e.cfg.Slots))
	gauge(descSlotsUsed, float64(used))
	gauge(descLeaseRemaining, remaining.Seconds())
	gauge(descFencingToken, float64(token))
	var bytes int64
	parts := e.store.List()
	for _, p := range parts {
		bytes += p.Bytes
	}
	gauge(descPartitions, float64(len(parts)))
	gauge(descPartitionBytes, float64(bytes))
	e.gcMu.Lock()
	execBytes := e.execBytes
	e.gcMu.Unlock()
	gauge(descExecBytes, float64(execBytes))
	full := 0.0
	if e.diskFullNow() {
		full = 1
	}
	gauge(descDiskFull, full)
}
