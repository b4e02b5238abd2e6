package master

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"jobmaster/api"
)

// stream opens GET url (an event stream) and returns a function that
// reads its next line, failing the test after a generous wait.
func stream(t *testing.T, url string, header ...string) (next func() string, resp *http.Response) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	require.NoError(t, err)
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err = http.DefaultClient.Do(req)
	require.NoError(t, err)
	t.Cleanup(func() { resp.Body.Close() })
	lines := make(chan string, 1024)
	go func() {
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	return func() string {
		t.Helper()
		select {
		case l, ok := <-lines:
			if !ok {
				return ""
			}
			return l
		case <-time.After(20 * time.Second):
			t.Fatalf("no line from %s", url)
			return ""
		}
	}, resp
}

func parseEvent(t *testing.T, line string) api.Event {
	t.Helper()
	var e api.Event
	require.NoError(t, json.Unmarshal([]byte(line), &e), "line %q", line)
	return e
}

// until reads events until one satisfies stop, and returns them all,
// heartbeats left out.
func until(t *testing.T, next func() string, stop func(api.Event) bool) []api.Event {
	t.Helper()
	var out []api.Event
	for {
		l := next()
		require.NotEmpty(t, l, "the stream ended")
		e := parseEvent(t, l)
		if e.Type == api.EventHeartbeat {
			continue
		}
		out = append(out, e)
		if stop(e) {
			return out
		}
	}
}

func canceled(e api.Event) bool { return e.Type == "job-status" && e.State == "CANCELED" }

func TestEveryMasterStreamsTheSameEvents(t *testing.T) {
	c := newTestCluster(t, 3)
	l := c.leader()
	f := c.follower()
	next, resp := stream(t, c.url(f, "/v1/events?index=0"))
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Equal(t, "application/x-ndjson", resp.Header.Get("Content-Type"))
	first := parseEvent(t, next())
	require.Equal(t, api.EventHeartbeat, first.Type, "the first line says where the stream starts")
	require.Equal(t, uint64(0), first.Index)

	requireAccepted(t, do(t, http.MethodPut, c.url(l, "/v1/jobs/e-1"), []byte(simpleJob)))
	require.Equal(t, http.StatusAccepted, do(t, http.MethodPost, c.url(l, "/v1/jobs/e-1/cancel"), nil).status)
	onFollower := until(t, next, canceled)
	require.Equal(t, "leader-established", onFollower[0].Type)
	require.Equal(t, c.masters[l].ID(), onFollower[0].Node)
	require.Equal(t, c.masters[l].Token(), onFollower[0].FencingToken)

	// The leader's stream, filtered, shows the same events at the same
	// places.
	nextL, _ := stream(t, c.url(l, "/v1/events?index=0&topic=job&topic=execution&job=e-1"))
	onLeader := until(t, nextL, canceled)
	var want []api.Event
	for _, e := range onFollower {
		if e.Job == "e-1" {
			want = append(want, e)
		}
	}
	require.Equal(t, want, onLeader)
	var types []string
	for _, e := range onLeader {
		types = append(types, fmt.Sprintf("%s %s %s", e.Type, e.Execution, e.State))
	}
	require.Equal(t, []string{"job-status  CREATED", "execution-state e-1/v/0/0 CANCELED", "execution-state e-1/v/1/0 CANCELED", "job-status  CANCELED"}, types)

	// Resuming after any event of an entry gives the rest of it, then what
	// follows.
	mid := onLeader[1]
	nextR, _ := stream(t, c.url(l, fmt.Sprintf("/v1/events?index=%d&offset=%d&job=e-1", mid.Index, *mid.Offset)))
	require.Equal(t, api.EventHeartbeat, parseEvent(t, nextR()).Type)
	require.Equal(t, onLeader[2:], until(t, nextR, canceled))

	// The job's answer names the index it was read at (at or after its
	// last event: a consistent read's fence may come after it): from
	// there on, nothing of it is left to come.
	r := do(t, http.MethodGet, c.url(l, "/v1/jobs/e-1"), nil)
	at, err := strconv.ParseUint(r.header.Get(api.IndexHeader), 10, 64)
	require.NoError(t, err)
	require.GreaterOrEqual(t, at, onLeader[3].Index)
}

func TestEventStreamRefusesWhatItNoLongerHolds(t *testing.T) {
	c := newTestCluster(t, 3, func(cfg *Config) { cfg.EventBuffer = 2 })
	l := c.leader()
	for i := range 4 {
		requireAccepted(t, do(t, http.MethodPut, c.url(l, fmt.Sprintf("/v1/jobs/g-%d", i)), []byte(simpleJob)))
	}
	r := do(t, http.MethodGet, c.url(l, "/v1/events?index=0"), nil)
	require.Equal(t, http.StatusGone, r.status, "%s", r.body)
	gone := decode[api.EventsGone](t, r)
	require.Greater(t, gone.OldestIndex, uint64(0))
	require.Contains(t, gone.Error, "read the state again")
	next, resp := stream(t, c.url(l, fmt.Sprintf("/v1/events?index=%d", gone.OldestIndex)))
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Equal(t, gone.OldestIndex, parseEvent(t, next()).Index)

	for bad, says := range map[string]string{
		"index=x": `index "x"`, "offset=1": "offset needs an index", "index=1&topic=jobs": `topic "jobs"`,
		"index=1&index=2": "given once", "index=1&offset=-1": `offset "-1"`,
		"topics=job":                      `unknown parameter "topics": the event stream takes index, offset, topic and job`,
		"index=1&%zz":                     "malformed query",
		"job=%3Cscript%3E":                `job: "<script>" has the character '<'`,
		"job=" + strings.Repeat("j", 200): "job: longer than 128 characters",
	} {
		r := do(t, http.MethodGet, c.url(l, "/v1/events?"+bad), nil)
		require.Equal(t, http.StatusBadRequest, r.status, "%s: %s", bad, r.body)
		require.Contains(t, decode[api.Error](t, r).Error, says, bad)
	}
}

func TestEventStreamSpeaksServerSentEvents(t *testing.T) {
	c := newTestCluster(t, 3, func(cfg *Config) { cfg.EventHeartbeat = 100 * time.Millisecond })
	l := c.leader()
	requireAccepted(t, do(t, http.MethodPut, c.url(l, "/v1/jobs/s-1"), []byte(simpleJob)))
	var idx uint64
	next, resp := stream(t, c.url(l, "/v1/events?index=0&topic=job"), "Accept", "text/event-stream", "Last-Event-ID", "1")
	require.Equal(t, "text/event-stream", resp.Header.Get("Content-Type"))
	require.Equal(t, "retry: 1000", next())
	require.Equal(t, "", next())
	require.Equal(t, "event: heartbeat", next())
	require.Equal(t, "id: 1", next(), "Last-Event-ID wins over the URL's index")
	require.True(t, strings.HasPrefix(next(), "data: "))
	require.Equal(t, "", next())
	for {
		l := next()
		if strings.HasPrefix(l, "data: ") {
			e := parseEvent(t, strings.TrimPrefix(l, "data: "))
			if e.Type == "job-status" {
				require.Equal(t, "s-1", e.Job)
				idx = e.Index
				break
			}
		}
	}
	// Idle, it beats.
	for l := next(); l != "event: heartbeat"; l = next() {
	}
	var beat uint64
	_, err := fmt.Sscanf(next(), "id: %d", &beat)
	require.NoError(t, err)
	require.GreaterOrEqual(t, beat, idx, "a heartbeat carries the position of the stream")
}
