package metrics

import (
	"net/http"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// HTTP counts a node's requests by route, method and status code, and
// times them (but for streams, whose duration is how long a client
// listened).
type HTTP struct {
	requests *prometheus.CounterVec
	duration *prometheus.HistogramVec
	stream   func(r *http.Request) bool
}

// NewHTTP registers the request metrics on reg. stream tells the requests
// that stream (they are counted, not timed); nil: none.
func NewHTTP(reg prometheus.Registerer, stream func(r *http.Request) bool) *HTTP {
	h := &HTTP{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: Namespace, Name: "http_requests_total",
			Help: "HTTP requests served, by route (the pattern that matched), method and status code.",
		}, []string{"route", "method", "code"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: Namespace, Name: "http_request_duration_seconds",
			Help:    "Time to serve an HTTP request, by route and method (streaming routes are not timed).",
			Buckets: []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10},
		}, []string{"route", "method"}),
		stream: stream,
	}
	if h.stream == nil {
		h.stream = func(*http.Request) bool { return false }
	}
	reg.MustRegister(h.requests, h.duration)
	return h
}

// Wrap instruments next, whose innermost ServeMux sets the request's
// Pattern. A request no pattern matched counts under route "unmatched".
func (h *HTTP) Wrap(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		sw := &statusWriter{ResponseWriter: w}
		defer func() {
			route := r.Pattern
			if route == "" || route == "/" {
				route = "unmatched"
			}
			method := methodLabel(r.Method)
			h.requests.WithLabelValues(route, method, strconv.Itoa(sw.code())).Inc()
			if !h.stream(r) {
				h.duration.WithLabelValues(route, method).Observe(time.Since(start).Seconds())
			}
		}()
		next.ServeHTTP(sw, r)
	})
}

// methodLabel is a request's method as a label: the server takes any
// token as a method, before anything checks the request, so every method
// but the standard ones counts as "other" (else each made-up method a
// client sends, without a token or a certificate, would be new series
// kept for good).
func methodLabel(m string) string {
	switch m {
	case http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut, http.MethodPatch,
		http.MethodDelete, http.MethodOptions, http.MethodConnect, http.MethodTrace:
		return m
	}
	return "other"
}

// statusWriter remembers the status code written. It flushes, and unwraps
// for http.ResponseController, like the writer it wraps.
type statusWriter struct {
	http.ResponseWriter
	status int
}

func (w *statusWriter) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	return w.ResponseWriter.Write(b)
}

func (w *statusWriter) Flush() {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

func (w *statusWriter) code() int {
	if w.status == 0 {
		return http.StatusOK
	}
	return w.status
}
