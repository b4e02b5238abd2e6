package metrics

import (
	"net/http"
	"strconv"
	"sync"
	"time"

	gometrics "github.com/hashicorp/go-metrics"
	gmprom "github.com/hashicorp/go-metrics/prometheus"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"jobmaster/buildinfo"
)

// Namespace starts the name of every metric a node exports.
const Namespace = "jobmaster"

// NewRegistry returns a node's registry, with the Go runtime's and the
// process's collectors in it, and jobmaster_build_info: 1, labelled with
// the node's build (which revision, Go version and wire protocol each node
// of a cluster runs, during a rolling upgrade).
func NewRegistry(build buildinfo.Info) *prometheus.Registry {
	reg := prometheus.NewRegistry()
	info := prometheus.NewGauge(prometheus.GaugeOpts{Namespace: Namespace, Name: "build_info",
		Help: "1, labelled with the build this node runs (jobmaster version).",
		ConstLabels: prometheus.Labels{"revision": build.Revision, "go_version": build.GoVersion,
			"wire_protocol": strconv.Itoa(build.Wire)}})
	info.Set(1)
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}), info)
	return reg
}

var (
	libsOnce sync.Once
	libs     *prometheus.Registry
	libsErr  error
)

// RouteLibraries sends what hashicorp/raft and memberlist report through
// go-metrics to a Prometheus registry, once per process, and returns that
// registry. go-metrics is process-wide: in a process that runs several
// nodes (tests), their libraries' metrics add up in it.
func RouteLibraries() (*prometheus.Registry, error) {
	libsOnce.Do(func() {
		reg := prometheus.NewRegistry()
		sink, err := gmprom.NewPrometheusSinkFrom(gmprom.PrometheusOpts{
			// Never expire: a gauge such as the time since the leader's
			// last contact must not vanish while nothing moves.
			Expiration: 0,
			Registerer: reg,
			Name:       "jobmaster_libraries_sink",
		})
		if err != nil {
			libsErr = err
			return
		}
		cfg := gometrics.DefaultConfig(Namespace)
		cfg.EnableHostname = false       // the node is Prometheus's target label
		cfg.EnableRuntimeMetrics = false // the Go collector has them
		cfg.TimerGranularity = time.Millisecond
		if _, err := gometrics.NewGlobal(cfg, sink); err != nil {
			libsErr = err
			return
		}
		libs = reg
	})
	return libs, libsErr
}

// Handler serves GET /v1/metrics: the node's registry and the libraries',
// in Prometheus's text format. A metric that cannot be gathered is left out
// rather than failing the scrape.
func Handler(reg *prometheus.Registry) http.Handler {
	gs := prometheus.Gatherers{reg}
	if l, err := RouteLibraries(); err == nil && l != nil {
		gs = append(gs, l)
	}
	return promhttp.HandlerFor(gs, promhttp.HandlerOpts{ErrorHandling: promhttp.ContinueOnError})
}

// RegisterCertExpiry adds jobmaster_tls_cert_expiry_seconds to reg: the
// seconds until the node's TLS certificate (notAfter, rereads included)
// expires at now, negative once it has.
func RegisterCertExpiry(reg *prometheus.Registry, notAfter, now func() time.Time) {
	reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Namespace: Namespace, Name: "tls_cert_expiry_seconds",
		Help: "Seconds until this node's TLS certificate expires (negative once it has)."},
		func() float64 { return notAfter().Sub(now()).Seconds() }))
}
