// Package metrics is how a jobmaster node exposes Prometheus metrics on
// GET /v1/metrics (docs/operations.md lists every metric).
//
// Vocabulary:
//   - registry: one per node (NewRegistry), holding the node's own metrics,
//     the Go runtime's and the process's.
//   - libraries: hashicorp/raft and memberlist report through the
//     process-wide go-metrics API; RouteLibraries sends what they report to
//     a Prometheus sink in a registry of its own, once per process, and
//     Handler serves it beside the node's registry. Their names start with
//     jobmaster_raft_ and jobmaster_memberlist_.
//   - collector: a gauge that comes from a node's state is read when it is
//     scraped (a prometheus.Collector), never kept in step by hand.
//   - route: the pattern of net/http's ServeMux that served a request
//     ("/v1/jobs/{id}"), never its raw path, so that request metrics have a
//     bounded set of labels.
//
// Nothing needs configuring: every node serves its metrics from the start.
package metrics
