package master

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-msgpack/v2/codec"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"

	"jobmaster/api"
	"jobmaster/fsm"
	"jobmaster/jobspec"
	"jobmaster/pki"
	"jobmaster/transport"
)

// Submissions that reach a follower together travel to the leader
// together, and every client gets its own answer.
func TestRelayBatchesConcurrentSubmissions(t *testing.T) {
	c := newTestCluster(t, 3)
	l, f := c.leader(), c.follower()
	const n = 200
	var wg sync.WaitGroup
	status := make([]int, n)
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			status[i] = do(t, http.MethodPut, c.url(f, fmt.Sprintf("/v1/jobs/batch-%d", i)), []byte(simpleJob)).status
		}()
	}
	wg.Wait()
	// A batch that got no answer (the leader stepped down under it, as a
	// loaded machine can make it do) is relayed again, and the submissions
	// its leader did commit then find their job as given: 200, not 201.
	// Without such a batch every job is new.
	m := c.masters[f].metrics
	failed := testutil.ToFloat64(m.relayBatches.WithLabelValues("failed"))
	for i, s := range status {
		if failed > 0 && s == http.StatusOK {
			continue
		}
		require.Equal(t, http.StatusCreated, s, "job %d", i)
	}
	answered := testutil.ToFloat64(m.relayBatches.WithLabelValues("answered"))
	if failed == 0 {
		assert.Equal(t, float64(n), testutil.ToFloat64(m.relaySubmissions), "every submission went through the relay")
	}
	assert.Less(t, answered, float64(n), "submissions that waited together went together")
	l, f = c.leader(), c.follower()
	for i := 0; i < n; i++ {
		requireStatus(t, http.StatusOK, do(t, http.MethodGet, c.url(l, fmt.Sprintf("/v1/jobs/batch-%d", i)), nil))
	}

	// Again, relayed or not: the same spec is 200, another one 409, and a
	// POST's id is chosen by the master that took it.
	requireStatus(t, http.StatusOK, do(t, http.MethodPut, c.url(f, "/v1/jobs/batch-0"), []byte(simpleJob)))
	requireStatus(t, http.StatusConflict, do(t, http.MethodPut, c.url(f, "/v1/jobs/batch-0"), []byte(`{"vertices":[{"id":"w","parallelism":1,"command":["true"]}]}`)))
	r := do(t, http.MethodPost, c.url(f, "/v1/jobs"), []byte(simpleJob))
	requireStatus(t, http.StatusCreated, r)
	id := decode[struct{ ID string }](t, r).ID
	assert.Equal(t, "/v1/jobs/"+id, r.header.Get("Location"))
	assert.Equal(t, c.masters[l].HTTPAddr(), r.header.Get(api.LeaderHeader), "a follower's answer names the leader")
	assert.Equal(t, c.masters[l].HTTPAddr(), do(t, http.MethodGet, c.url(l, "/v1/health"), nil).header.Get(api.LeaderHeader))
	requireStatus(t, http.StatusOK, do(t, http.MethodGet, c.url(l, "/v1/jobs/"+id), nil))
	// A region that can never fit is refused by the leader, through the
	// relay, with the leader's words.
	r = do(t, http.MethodPut, c.url(f, "/v1/jobs/huge"), []byte(`{"vertices":[{"id":"v","parallelism":1,"command":["true"],"resources":{"memory_mb":1000000000}}]}`))
	assert.Equal(t, http.StatusBadRequest, r.status, "%s", r.body)
}

func requireStatus(t *testing.T, want int, r httpResult) {
	t.Helper()
	require.Equal(t, want, r.status, "%s", r.body)
}

// What the relay's endpoint refuses, before any submission is decided.
func TestSubmitBatchRefusesBadBatches(t *testing.T) {
	c := newTestCluster(t, 3)
	l, f := c.leader(), c.follower()
	encode := func(b relayBatch) []byte {
		var data []byte
		require.NoError(t, codec.NewEncoderBytes(&data, relayHandle).Encode(&b))
		return data
	}
	post := func(i int, body []byte, contentType string) httpResult {
		return do(t, http.MethodPost, c.url(i, relayPath), body, "Content-Type", contentType)
	}
	good := submission{ID: "ok", Spec: mustSpec(t, simpleJob)}
	zero := submission{ID: "zero", Spec: &jobspec.Spec{Vertices: []jobspec.Vertex{{ID: "v", Parallelism: 0, Command: []string{"true"}}}}}
	for _, x := range []struct {
		name, contentType string
		body              []byte
		want              int
		says              string
	}{
		{"not msgpack", transport.BinaryType, []byte("{]"), http.StatusBadRequest, "malformed batch"},
		{"JSON", transport.JSONType, encode(relayBatch{Submissions: []submission{good}}), http.StatusUnsupportedMediaType, ""},
		{"empty", transport.BinaryType, encode(relayBatch{}), http.StatusBadRequest, "1 to 512 submissions"},
	} {
		r := post(l, x.body, x.contentType)
		assert.Equal(t, x.want, r.status, "%s: %s", x.name, r.body)
		assert.Contains(t, string(r.body), x.says, x.name)
	}
	// A submission that fails the checks is refused alone, with the
	// reason; the others in its batch are decided.
	r := post(l, encode(relayBatch{Submissions: []submission{{ID: "a/b", Spec: good.Spec}, {ID: "x"}, zero, {ID: "ok2", Spec: good.Spec}}}), transport.BinaryType)
	requireStatus(t, http.StatusOK, r)
	var mixed relayAnswers
	require.NoError(t, codec.NewDecoderBytes(r.body, relayHandle).Decode(&mixed))
	require.Len(t, mixed.Answers, 4)
	for i, says := range []string{"job id", "no spec", "parallelism"} {
		assert.Equal(t, http.StatusBadRequest, mixed.Answers[i].Status, "%d", i)
		assert.Contains(t, string(mixed.Answers[i].Body), says)
	}
	assert.Equal(t, http.StatusCreated, mixed.Answers[3].Status, "%s", mixed.Answers[3].Body)
	// A follower is no leader: the batch goes again once the leader is known.
	r = post(f, encode(relayBatch{Submissions: []submission{good}}), transport.BinaryType)
	assert.Equal(t, http.StatusServiceUnavailable, r.status, "%s", r.body)
	// The leader answers each submission.
	r = post(l, encode(relayBatch{Submissions: []submission{good, good}}), transport.BinaryType)
	requireStatus(t, http.StatusOK, r)
	var ans relayAnswers
	require.NoError(t, codec.NewDecoderBytes(r.body, relayHandle).Decode(&ans))
	require.Len(t, ans.Answers, 2)
	assert.Equal(t, http.StatusCreated, ans.Answers[0].Status, "%s", ans.Answers[0].Body)
	assert.Equal(t, http.StatusOK, ans.Answers[1].Status, "the second is a retry of the first: %s", ans.Answers[1].Body)
}

// With TLS, only a master's certificate may relay.
func TestRelayNeedsAServersCertificate(t *testing.T) {
	c := newTLSCluster(t, 3)
	l := c.leader()
	var data []byte
	require.NoError(t, codec.NewEncoderBytes(&data, relayHandle).Encode(&relayBatch{
		Submissions: []submission{{ID: "tls-relay", Secret: c.token, Spec: mustSpec(t, simpleJob)}}}))
	for _, x := range []struct {
		name string
		role pki.Role
		want int
	}{
		{"no certificate", "", http.StatusForbidden},
		{"a client's", pki.Client, http.StatusForbidden},
		{"an executor's", pki.Executor, http.StatusForbidden},
		{"a master's", pki.Server, http.StatusOK},
	} {
		hc := c.client(x.role, "x1")
		req, err := http.NewRequest(http.MethodPost, transport.URL(hc, c.masters[l].HTTPAddr(), relayPath), bytes.NewReader(data))
		require.NoError(t, err)
		req.Header.Set("Content-Type", transport.BinaryType)
		resp, err := hc.Do(req)
		require.NoError(t, err)
		resp.Body.Close()
		assert.Equal(t, x.want, resp.StatusCode, x.name)
	}
}

// A spec that crosses the relay is the spec the leader would have parsed
// itself: the job the FSM keeps is the same, and a retry through the other
// path is no conflict.
func TestRelayedSpecIsTheParsedSpec(t *testing.T) {
	var bodies []string
	files, err := filepath.Glob("../examples/*.json")
	require.NoError(t, err)
	require.NotEmpty(t, files)
	for _, f := range files {
		b, err := os.ReadFile(f)
		require.NoError(t, err)
		bodies = append(bodies, string(b))
	}
	check := func(t require.TestingT, body string) {
		parsed, err := jobspec.Parse([]byte(body))
		require.NoError(t, err)
		var data []byte
		require.NoError(t, codec.NewEncoderBytes(&data, relayHandle).Encode(&relayBatch{Submissions: []submission{{ID: "j", Spec: parsed}}}))
		var got relayBatch
		require.NoError(t, codec.NewDecoderBytes(data, relayHandle).Decode(&got))
		relayed := got.Submissions[0].Spec
		require.NoError(t, checkRelayed(got.Submissions[0]))
		// As the FSM keeps each: through the log's encoding.
		kept := func(s *jobspec.Spec) *jobspec.Spec {
			cmds, err := fsm.Decode(fsm.MustEncode(&fsm.SubmitJob{ID: "j", Spec: s}))
			require.NoError(t, err)
			return cmds[0].(*fsm.SubmitJob).Spec
		}
		require.Equal(t, kept(parsed), kept(relayed), "spec %s", body)
	}
	for _, b := range bodies {
		check(t, b)
	}
	rapid.Check(t, func(rt *rapid.T) { check(rt, genRelaySpec(rt)) })
}

// genRelaySpec draws a spec that uses every field a spec may have.
func genRelaySpec(t *rapid.T) string {
	type input struct {
		From         string `json:"from"`
		Mode         string `json:"mode,omitempty"`
		Distribution string `json:"distribution,omitempty"`
	}
	type vertex struct {
		ID          string            `json:"id"`
		Parallelism int               `json:"parallelism"`
		Command     []string          `json:"command"`
		Env         map[string]string `json:"env,omitempty"`
		Inputs      []input           `json:"inputs,omitempty"`
		Group       string            `json:"slot_sharing_group,omitempty"`
		Resources   map[string]int    `json:"resources,omitempty"`
	}
	n := rapid.IntRange(1, 3).Draw(t, "vertices")
	var vs []vertex
	for i := 0; i < n; i++ {
		v := vertex{ID: fmt.Sprintf("v%d", i), Parallelism: rapid.IntRange(1, 4).Draw(t, "parallelism"),
			Command: append([]string{"prog"}, rapid.SliceOfN(rapid.StringMatching(`[a-z ]{0,6}`), 0, 2).Draw(t, "args")...)}
		if rapid.Bool().Draw(t, "env") {
			v.Env = rapid.MapOfN(rapid.StringMatching(`[A-Z]{1,4}`), rapid.StringMatching(`[^\x00]{0,8}`), 0, 3).Draw(t, "env")
		}
		if i > 0 && rapid.Bool().Draw(t, "input") {
			in := input{From: fmt.Sprintf("v%d", rapid.IntRange(0, i-1).Draw(t, "from")),
				Mode: rapid.SampledFrom([]string{"", "pipelined", "blocking"}).Draw(t, "mode")}
			v.Inputs = []input{in}
		}
		if rapid.Bool().Draw(t, "group") {
			v.Group = rapid.SampledFrom([]string{"default", "g2"}).Draw(t, "group name")
		}
		if rapid.Bool().Draw(t, "resources") {
			v.Resources = map[string]int{"cpu_millis": rapid.IntRange(0, 4000).Draw(t, "cpu"), "memory_mb": rapid.IntRange(0, 4096).Draw(t, "mem")}
		}
		vs = append(vs, v)
	}
	spec := map[string]any{"vertices": vs}
	if rapid.Bool().Draw(t, "name") {
		spec["name"] = rapid.StringMatching(`[a-z]{0,8}`).Draw(t, "name")
	}
	if rapid.Bool().Draw(t, "restart") {
		spec["restart"] = json.RawMessage(rapid.SampledFrom([]string{
			`{"strategy": "none"}`,
			`{"strategy": "fixed-delay", "attempts": 2, "delay": "1s"}`,
			`{"strategy": "failure-rate", "max_failures": 3, "interval": "10s", "delay": "500ms"}`,
			`{"strategy": "exponential-delay", "initial_delay": "500ms", "max_delay": "2s", "multiplier": 1.5, "jitter": 0.1}`,
		}).Draw(t, "strategy"))
	}
	if rapid.Bool().Draw(t, "failover") {
		spec["failover"] = rapid.SampledFrom([]string{"region", "full"}).Draw(t, "scope")
	}
	b, err := json.Marshal(spec)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// What a follower makes of the leader's answer to a batch: 503 and a
// lost connection are no answer (the submissions are relayed again); a
// leader without the endpoint (an older version) has each forwarded as it
// came; any other refusal answers every submission with the reason.
func TestRelayReadsTheLeadersAnswer(t *testing.T) {
	var status int
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		writeError(w, status, "because")
	}))
	defer srv.Close()
	addr := strings.TrimPrefix(srv.URL, "http://")
	rl := newRelay(&Master{client: srv.Client(), cfg: Config{RequestWait: time.Second}})
	batch := []*relayed{{sub: submission{ID: "a"}}, {sub: submission{ID: "b"}}}
	for _, x := range []struct {
		status int
		retry  bool
		err    error
	}{
		{http.StatusServiceUnavailable, true, nil},
		{http.StatusNotFound, true, errRelayUnknown},
		{http.StatusMethodNotAllowed, true, errRelayUnknown},
		{http.StatusUnsupportedMediaType, true, errRelayUnknown},
		{http.StatusBadRequest, false, nil},
		{http.StatusForbidden, false, nil},
		{http.StatusInternalServerError, false, nil},
	} {
		status = x.status
		answers, err := rl.post(addr, batch)
		if x.retry {
			require.Error(t, err, "%d", x.status)
			if x.err != nil {
				require.ErrorIs(t, err, x.err)
			}
			continue
		}
		require.NoError(t, err, "%d", x.status)
		require.Len(t, answers, 2)
		for _, a := range answers {
			assert.Equal(t, http.StatusBadGateway, a.Status)
			assert.Contains(t, string(a.Body), fmt.Sprintf("refused the relayed submission: %d because", x.status))
		}
	}
	srv.Close()
	_, err := rl.post(addr, batch)
	require.Error(t, err, "no leader there")
}

// A batch's submissions count against the quotas together: a batch of
// four new jobs under --max-jobs 3 admits three.
func TestRelayedBatchCountsQuotasTogether(t *testing.T) {
	c := newTestCluster(t, 3, func(cfg *Config) { cfg.MaxJobs = 3 })
	l := c.leader()
	spec := mustSpec(t, simpleJob)
	var subs []submission
	for _, id := range []string{"q1", "q2", "q2", "q3", "q4"} { // q2 twice: a retry is no new job
		subs = append(subs, submission{ID: id, Spec: spec})
	}
	var data []byte
	require.NoError(t, codec.NewEncoderBytes(&data, relayHandle).Encode(&relayBatch{Submissions: subs}))
	r := do(t, http.MethodPost, c.url(l, relayPath), data, "Content-Type", transport.BinaryType)
	requireStatus(t, http.StatusOK, r)
	var ans relayAnswers
	require.NoError(t, codec.NewDecoderBytes(r.body, relayHandle).Decode(&ans))
	var got []int
	for _, a := range ans.Answers {
		got = append(got, a.Status)
	}
	assert.Equal(t, []int{http.StatusCreated, http.StatusCreated, http.StatusOK, http.StatusCreated, http.StatusTooManyRequests}, got)
}
