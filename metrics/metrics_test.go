package metrics

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	gometrics "github.com/hashicorp/go-metrics"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"jobmaster/buildinfo"
)

func scrape(t *testing.T, h http.Handler) string {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/v1/metrics", nil))
	if rec.Code != http.StatusOK {
		t.Fatalf("scrape: %d %s", rec.Code, rec.Body)
	}
	return rec.Body.String()
}

func TestLibrariesReachTheHandler(t *testing.T) {
	if _, err := RouteLibraries(); err != nil {
		t.Fatal(err)
	}
	// What raft reports through go-metrics' global API.
	gometrics.IncrCounter([]string{"raft", "apply"}, 1)
	gometrics.SetGauge([]string{"raft", "peers"}, 3)
	body := scrape(t, Handler(NewRegistry(buildinfo.Info{Revision: "abc", GoVersion: "go1.26", Wire: 3})))
	for _, want := range []string{"jobmaster_raft_apply 1", "jobmaster_raft_peers 3", "go_goroutines", "process_start_time_seconds",
		`jobmaster_build_info{go_version="go1.26",revision="abc",wire_protocol="3"} 1`} {
		if !strings.Contains(body, want) {
			t.Errorf("the scrape lacks %q", want)
		}
	}
}

func TestHTTPCountsRoutesNotPaths(t *testing.T) {
	reg := NewRegistry(buildinfo.Info{})
	h := NewHTTP(reg, func(r *http.Request) bool { return r.Pattern == "/v1/events" })
	mux := http.NewServeMux()
	mux.HandleFunc("/v1/jobs/{id}", func(w http.ResponseWriter, r *http.Request) {
		if r.PathValue("id") == "nope" {
			http.Error(w, "no", http.StatusNotFound)
			return
		}
		io.WriteString(w, "ok")
	})
	mux.HandleFunc("/v1/events", func(w http.ResponseWriter, r *http.Request) {
		w.(http.Flusher).Flush() // a stream flushes through the wrapper
	})
	srv := httptest.NewServer(h.Wrap(mux))
	defer srv.Close()
	for _, p := range []string{"/v1/jobs/a", "/v1/jobs/b", "/v1/jobs/nope", "/v1/events", "/elsewhere"} {
		resp, err := http.Get(srv.URL + p)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	// Made-up methods, as many as a client likes: one label between them.
	for _, m := range []string{"FOO", "BAR", "M" + strings.Repeat("X", 1000)} {
		req, _ := http.NewRequest(m, srv.URL+"/elsewhere", nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		// To the end: the stream's headers arrive on its flush, before its
		// handler returns and the wrapper counts it; its last chunk is sent
		// after that.
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	for _, c := range []struct {
		labels []string
		want   float64
	}{
		{[]string{"/v1/jobs/{id}", "GET", "200"}, 2},
		{[]string{"/v1/jobs/{id}", "GET", "404"}, 1},
		{[]string{"/v1/events", "GET", "200"}, 1},
		{[]string{"unmatched", "GET", "404"}, 1},
		{[]string{"unmatched", "other", "404"}, 3},
	} {
		if got := testutil.ToFloat64(h.requests.WithLabelValues(c.labels...)); got != c.want {
			t.Errorf("requests%v = %v, want %v", c.labels, got, c.want)
		}
	}
	if n := testutil.CollectAndCount(h.duration); n != 3 { // jobs, unmatched GET and other; the stream is not timed
		t.Errorf("%d latency series, want 3", n)
	}
}
