package master

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"jobmaster/acl"
	"jobmaster/api"
	"jobmaster/fsm"
	"jobmaster/jobspec"
	"jobmaster/pki"
	"jobmaster/transport"
)

// logBuffer collects a master's log lines.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *logBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *logBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// aclCluster is three masters with --acl on loopback, without TLS.
func aclCluster(t *testing.T, tweaks ...func(*Config)) (*testCluster, *logBuffer) {
	logs := &logBuffer{}
	c := newTestCluster(t, 3, append([]func(*Config){func(cfg *Config) {
		cfg.ACL = true
		cfg.Logger = slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelInfo}))
	}}, tweaks...)...)
	c.leader()
	return c, logs
}

func tokenOf(t *testing.T, r httpResult) api.ACLToken {
	t.Helper()
	require.Equal(t, http.StatusCreated, r.status, "%s", r.body)
	tok := decode[api.ACLToken](t, r)
	require.NotEmpty(t, tok.SecretID)
	require.NotEmpty(t, tok.AccessorID)
	return tok
}

func auth(secret string) []string { return []string{"X-Jobmaster-Token", secret} }

func TestACLTokensDecideEveryRequest(t *testing.T) {
	c, logs := aclCluster(t)
	l, f := c.leader(), c.follower()

	// Before the bootstrap nobody has a token: reads are 401, health is
	// not.
	r := do(t, "GET", c.url(f, "/v1/jobs"), nil)
	require.Equal(t, http.StatusUnauthorized, r.status, "%s", r.body)
	assert.Contains(t, string(r.body), "this request needs an ACL token (a read, submit or management token)")
	assert.Contains(t, string(r.body), "no token exists yet: create the first, a management token, with POST /v1/acl/bootstrap (jobmaster acl bootstrap)")
	assert.Equal(t, `Bearer realm="jobmaster"`, r.header.Get("WWW-Authenticate"))
	require.Equal(t, http.StatusOK, do(t, "GET", c.url(f, "/v1/health"), nil).status)

	// The bootstrap, through a follower, answers once.
	root := tokenOf(t, do(t, "POST", c.url(f, "/v1/acl/bootstrap"), nil))
	assert.Equal(t, "management", root.Policy)
	assert.Equal(t, "bootstrap", root.Name)
	again := do(t, "POST", c.url(l, "/v1/acl/bootstrap"), nil)
	require.Equal(t, http.StatusConflict, again.status, "%s", again.body)
	assert.Contains(t, string(again.body), "already bootstrapped")
	// Refused from the state: a request anyone may send costs no Raft
	// entry (each was one, 20 here raised the log by 20).
	before := c.masters[l].Raft().LastIndex()
	for range 20 {
		require.Equal(t, http.StatusConflict, do(t, "POST", c.url(l, "/v1/acl/bootstrap"), nil).status)
	}
	assert.Less(t, c.masters[l].Raft().LastIndex()-before, uint64(5), "Raft entries for 20 refused bootstraps")
	r = do(t, "GET", c.url(l, "/v1/jobs"), nil)
	require.Equal(t, http.StatusUnauthorized, r.status)
	assert.NotContains(t, string(r.body), "no token exists yet", "after the bootstrap")

	// Management creates tokens; the list never shows a secret.
	mk := func(name, policy string) api.ACLToken {
		body, _ := json.Marshal(api.ACLTokenRequest{Name: name, Policy: policy})
		return tokenOf(t, do(t, "POST", c.url(f, "/v1/acl/tokens"), body, auth(root.SecretID)...))
	}
	reader, submitter := mk("dashboard", "read"), mk("ci", "submit")
	list := do(t, "GET", c.url(l, "/v1/acl/tokens"), nil, auth(root.SecretID)...)
	require.Equal(t, http.StatusOK, list.status, "%s", list.body)
	for _, s := range []string{root.SecretID, reader.SecretID, submitter.SecretID} {
		assert.NotContains(t, string(list.body), s)
	}
	got := decode[api.ACLTokenList](t, list)
	require.Len(t, got.Tokens, 3)
	assert.Equal(t, api.ACLToken{AccessorID: reader.AccessorID, Name: "dashboard", Policy: "read"}, got.Tokens[1])
	for body, says := range map[string]string{
		`{"name":"x","policy":"admin"}`:                      `policy: unknown policy \"admin\"`,
		`{"name":"x"}`:                                       "policy: missing: use read, submit or management",
		`{"name":"x","policy":1}`:                            "policy: want a string, got JSON number",
		`{"name":"x","polcy":"read"}`:                        `polcy: unknown field (did you mean \"policy\"?)`,
		`{"name":"x","policy":"read"}{}`:                     "unexpected data after the value",
		`{"name":"x","policy":"read","Policy":"management"}`: "Policy: given twice",
	} {
		bad := do(t, "POST", c.url(f, "/v1/acl/tokens"), []byte(body), auth(root.SecretID)...)
		require.Equal(t, http.StatusBadRequest, bad.status, "%s: %s", body, bad.body)
		require.Contains(t, string(bad.body), says, body)
	}

	// Each policy, on every master (forwarded or served there).
	for i := range c.masters {
		job := "/v1/jobs/p" + string(rune('0'+i))
		for _, x := range []struct {
			method, path string
			body         []byte
			secret       string
			want         int
		}{
			{"PUT", job, []byte(simpleJob), reader.SecretID, http.StatusForbidden},
			{"PUT", job, []byte(simpleJob), submitter.SecretID, http.StatusCreated},
			{"GET", job, nil, reader.SecretID, http.StatusOK},
			{"GET", "/v1/jobs?stale", nil, reader.SecretID, http.StatusOK},
			{"GET", "/v1/cluster", nil, reader.SecretID, http.StatusOK},
			{"POST", job + "/cancel", nil, reader.SecretID, http.StatusForbidden},
			{"POST", job + "/cancel", nil, submitter.SecretID, http.StatusAccepted},
			{"GET", "/v1/operator/snapshot", nil, submitter.SecretID, http.StatusForbidden},
			{"GET", "/v1/operator/snapshot", nil, root.SecretID, http.StatusOK},
			{"GET", "/v1/acl/tokens", nil, submitter.SecretID, http.StatusForbidden},
			{"POST", "/v1/executors/e1/drain", []byte(`{}`), submitter.SecretID, http.StatusForbidden},
			{"DELETE", "/v1/executors/e1/drain", nil, submitter.SecretID, http.StatusForbidden},
			{"POST", "/v1/executors/e1/drain", []byte(`{}`), root.SecretID, http.StatusNotFound},
			{"GET", "/v1/jobs", nil, "", http.StatusUnauthorized},
			{"GET", "/v1/jobs", nil, "not-a-token-of-this-cluster", http.StatusUnauthorized},
			{"GET", "/v1/jobs?stale", nil, "not-a-token-of-this-cluster", http.StatusUnauthorized},
			{"PUT", "/v1/jobs/never", []byte(simpleJob), "not-a-token-of-this-cluster", http.StatusUnauthorized},
			{"GET", "/v1/state/hash", nil, "", http.StatusUnauthorized},
			{"GET", "/v1/health", nil, "", http.StatusOK},
		} {
			var h []string
			if x.secret != "" {
				h = auth(x.secret)
			}
			r := do(t, x.method, c.url(i, x.path), x.body, h...)
			assert.Equal(t, x.want, r.status, "master %d: %s %s: %s", i, x.method, x.path, r.body)
		}
	}
	r = do(t, "PUT", c.url(f, "/v1/jobs/denied"), []byte(simpleJob), auth(reader.SecretID)...)
	assert.Contains(t, string(r.body), `permission denied: token \"dashboard\" (policy read) may not PUT /v1/jobs/denied: it needs a submit or management token`)

	// Authorization: Bearer works as the header does.
	r = do(t, "GET", c.url(f, "/v1/jobs"), nil, "Authorization", "Bearer "+reader.SecretID)
	require.Equal(t, http.StatusOK, r.status, "%s", r.body)

	// A deleted token is unknown at once on the leader; the last management
	// token stays.
	del := do(t, "DELETE", c.url(f, "/v1/acl/tokens/"+reader.AccessorID), nil, auth(root.SecretID)...)
	require.Equal(t, http.StatusOK, del.status, "%s", del.body)
	require.Equal(t, http.StatusUnauthorized, do(t, "GET", c.url(l, "/v1/jobs"), nil, auth(reader.SecretID)...).status)
	require.Equal(t, http.StatusNotFound, do(t, "DELETE", c.url(f, "/v1/acl/tokens/"+reader.AccessorID), nil, auth(root.SecretID)...).status)
	last := do(t, "DELETE", c.url(l, "/v1/acl/tokens/"+root.AccessorID), nil, auth(root.SecretID)...)
	require.Equal(t, http.StatusConflict, last.status, "%s", last.body)

	// Every write is audited with its token's name, never its secret.
	c.waitSameState()
	text := logs.String()
	for _, want := range []string{
		`action="acl bootstrap" token=none`,
		`action="acl token create" token=bootstrap`,
		`action="job submit" token=ci`,
		`action="job cancel" token=ci`,
		`action="acl token delete" token=bootstrap`,
	} {
		assert.Contains(t, text, want)
	}
	for _, s := range []string{root.SecretID, reader.SecretID, submitter.SecretID} {
		assert.NotContains(t, text, s, "a secret reached the log")
	}
}

// A bootstrap or token creation repeated with the same secret (as the
// masters repeat a request at the next leader) creates one token and
// answers with it each time.
func TestACLSecretChosenByTheCaller(t *testing.T) {
	c, _ := aclCluster(t)
	l, f := c.leader(), c.follower()
	body := []byte(`{"secret_id":"a-secret-known-in-advance"}`)
	first := tokenOf(t, do(t, "POST", c.url(f, "/v1/acl/bootstrap"), body))
	second := tokenOf(t, do(t, "POST", c.url(l, "/v1/acl/bootstrap"), body))
	assert.Equal(t, first, second)
	assert.Equal(t, "a-secret-known-in-advance", first.SecretID)
	assert.Equal(t, http.StatusConflict, do(t, "POST", c.url(l, "/v1/acl/bootstrap"), nil).status)
	for _, b := range []string{`{"secret_id":"short"}`, `{"secret_id":"has spaces in it, many"}`, `{"policy":"read"}`, `{"nope":1}`} {
		r := do(t, "POST", c.url(l, "/v1/acl/bootstrap"), []byte(b))
		assert.Equal(t, http.StatusBadRequest, r.status, "%s: %s", b, r.body)
	}

	mgmt := auth("a-secret-known-in-advance")
	req := []byte(`{"name":"ci","policy":"submit","secret_id":"ci-secret-0123456789"}`)
	a := tokenOf(t, do(t, "POST", c.url(f, "/v1/acl/tokens"), req, mgmt...))
	b := tokenOf(t, do(t, "POST", c.url(l, "/v1/acl/tokens"), req, mgmt...))
	assert.Equal(t, a, b)
	other := do(t, "POST", c.url(l, "/v1/acl/tokens"), []byte(`{"name":"ci","policy":"read","secret_id":"ci-secret-0123456789"}`), mgmt...)
	assert.Equal(t, http.StatusConflict, other.status, "%s", other.body)
	list := decode[api.ACLTokenList](t, do(t, "GET", c.url(l, "/v1/acl/tokens"), nil, mgmt...))
	assert.Len(t, list.Tokens, 2)
}

func TestACLEndpointsNeedACLsOn(t *testing.T) {
	c := newTestCluster(t, 1)
	c.leader()
	for _, x := range []struct{ method, path string }{{"POST", "/v1/acl/bootstrap"}, {"GET", "/v1/acl/tokens"}, {"POST", "/v1/acl/tokens"}, {"DELETE", "/v1/acl/tokens/x"}} {
		r := do(t, x.method, c.url(0, x.path), nil)
		assert.Equal(t, http.StatusBadRequest, r.status, "%s %s", x.method, x.path)
		assert.Contains(t, string(r.body), "ACLs are off on this master")
	}
	// Without ACLs requests need no token, and writes are audited as
	// anonymous.
	requireAccepted(t, do(t, "PUT", c.url(0, "/v1/jobs/free"), []byte(simpleJob)))
}

// A master that does not know a token yet (a follower the token has not
// reached) sends a request for the leader on to it, unverified; what it
// serves itself it refuses.
func TestAuthorizeDefersOnlyToTheLeader(t *testing.T) {
	m := &Master{cfg: Config{ACL: true}, log: slog.New(slog.DiscardHandler), fsm: fsm.New()}
	req := func(method, target string) *http.Request {
		r := httptest.NewRequest(method, target, nil)
		r.Header.Set("X-Jobmaster-Token", "fresh-token-not-here-yet")
		return r
	}
	for _, x := range []struct {
		method, target, pattern string
		forwarded               bool
	}{
		{"GET", "/v1/jobs", "/v1/jobs", true},
		{"PUT", "/v1/jobs/a", "/v1/jobs/{id}", true},
		{"GET", "/v1/jobs?stale", "/v1/jobs", false},
		{"GET", "/v1/state/hash", "/v1/state/hash", false},
		{"PUT", "/v1/operator/snapshot", "/v1/operator/snapshot", false},
	} {
		w := httptest.NewRecorder()
		r, ok := m.authorize(w, req(x.method, x.target), acl.Route{Method: x.method, Pattern: x.pattern})
		require.Equal(t, x.forwarded, ok, "%s %s: %s", x.method, x.target, w.Body)
		if !ok {
			assert.Equal(t, http.StatusUnauthorized, w.Code)
			continue
		}
		c := callerOf(r)
		require.NotNil(t, c)
		assert.True(t, c.unverified)
		// On the leader, the state decides.
		w = httptest.NewRecorder()
		_, ok = m.confirmCaller(w, r)
		assert.False(t, ok)
		assert.Equal(t, http.StatusUnauthorized, w.Code)
	}
	// Leading, this master refuses what it does not know.
	m.session = &session{}
	w := httptest.NewRecorder()
	_, ok := m.authorize(w, req("GET", "/v1/jobs"), acl.Route{Method: "GET", Pattern: "/v1/jobs"})
	assert.False(t, ok)
	assert.Equal(t, http.StatusUnauthorized, w.Code)
}

func TestDriveByRequestsRefused(t *testing.T) {
	for _, on := range []bool{false, true} {
		c := newTestCluster(t, 3, func(cfg *Config) { cfg.ACL = on })
		l, f := c.leader(), c.follower()
		var h []string
		if on {
			root := tokenOf(t, do(t, "POST", c.url(l, "/v1/acl/bootstrap"), nil))
			h = auth(root.SecretID)
		}
		raw := func(method, url, ctype string, body []byte, extra ...string) httpResult {
			req, err := http.NewRequest(method, url, bytes.NewReader(body))
			require.NoError(t, err)
			if ctype != "" {
				req.Header.Set("Content-Type", ctype)
			}
			for i := 0; i+1 < len(extra); i += 2 {
				req.Header.Set(extra[i], extra[i+1])
			}
			for i := 0; i+1 < len(h); i += 2 {
				req.Header.Set(h[i], h[i+1])
			}
			resp, err := http.DefaultClient.Do(req)
			require.NoError(t, err)
			defer resp.Body.Close()
			var b bytes.Buffer
			_, _ = b.ReadFrom(resp.Body)
			return httpResult{status: resp.StatusCode, body: b.Bytes()}
		}
		for _, i := range []int{l, f} {
			// A form's text/plain POST, and any body not JSON: 415.
			r := raw("POST", c.url(i, "/v1/jobs"), "text/plain", []byte(simpleJob))
			assert.Equal(t, http.StatusUnsupportedMediaType, r.status, "acl=%v: %s", on, r.body)
			r = raw("PUT", c.url(i, "/v1/jobs/form"), "application/x-www-form-urlencoded", []byte(simpleJob))
			assert.Equal(t, http.StatusUnsupportedMediaType, r.status, "%s", r.body)
			r = raw("PUT", c.url(i, "/v1/jobs/none"), "", []byte(simpleJob))
			assert.Equal(t, http.StatusUnsupportedMediaType, r.status, "%s", r.body)
			r = raw("PUT", c.url(i, "/v1/operator/snapshot"), "application/json", []byte("{}"))
			assert.Equal(t, http.StatusUnsupportedMediaType, r.status, "%s", r.body)
			// Another origin: 403, reads included; the API's own: served.
			r = raw("PUT", c.url(i, "/v1/jobs/x"), "application/json", []byte(simpleJob), "Origin", "http://evil.example")
			assert.Equal(t, http.StatusForbidden, r.status, "%s", r.body)
			r = raw("GET", c.url(i, "/v1/jobs"), "", nil, "Origin", "null")
			assert.Equal(t, http.StatusForbidden, r.status, "%s", r.body)
			own := "http://" + c.masters[i].HTTPAddr()
			r = raw("PUT", c.url(i, "/v1/jobs/same-origin"), "application/json", []byte(simpleJob), "Origin", own)
			requireAccepted(t, r)
		}
		// A bodiless write needs no Content-Type.
		r := raw("POST", c.url(f, "/v1/jobs/same-origin/cancel"), "", nil)
		assert.Equal(t, http.StatusAccepted, r.status, "%s", r.body)
		c.stopAll()
	}
}

// A hop count a client makes up is no master's: it is dropped, and the
// request is relayed as usual.
func TestHopCountFromOutsideIsDropped(t *testing.T) {
	for v, keep := range map[string]bool{"1": true, "3": true, "0": false, "4": false, "-100": false, "01": false, "x": false, "": false} {
		assert.Equal(t, keep, validHops(v), "%q", v)
	}
	c := newTestCluster(t, 3)
	c.leader()
	f := c.follower()
	for _, v := range []string{"-100", "0", "999"} {
		start := time.Now()
		r := do(t, "PUT", c.url(f, "/v1/jobs/hops"+strings.TrimPrefix(v, "-")), []byte(simpleJob), hopsHeader, v)
		requireAccepted(t, r)
		assert.Less(t, time.Since(start), 3*time.Second)
	}
}

func TestQuotasRefuseSubmits(t *testing.T) {
	c := newTestCluster(t, 3, func(cfg *Config) { cfg.MaxJobs, cfg.MaxExecutions = 3, 5 })
	c.leader()
	f := c.follower()
	requireAccepted(t, do(t, "PUT", c.url(f, "/v1/jobs/a"), []byte(simpleJob))) // 2 subtasks
	requireAccepted(t, do(t, "PUT", c.url(f, "/v1/jobs/b"), []byte(simpleJob))) // 4
	r := do(t, "PUT", c.url(f, "/v1/jobs/c"), []byte(simpleJob))                // would be 6
	require.Equal(t, http.StatusTooManyRequests, r.status, "%s", r.body)
	assert.Contains(t, string(r.body), "quota reached: the cluster holds 4 executions, and this job's 2 subtasks would pass --max-executions (5)")
	one := `{"vertices":[{"id":"v","parallelism":1,"command":["true"]}]}`
	requireAccepted(t, do(t, "PUT", c.url(f, "/v1/jobs/c"), []byte(one)))
	r = do(t, "POST", c.url(f, "/v1/jobs"), []byte(one))
	require.Equal(t, http.StatusTooManyRequests, r.status, "%s", r.body)
	assert.Contains(t, string(r.body), "quota reached: the cluster holds 3 jobs, and --max-jobs is 3")
	// A job already there is no new one: its submit is answered as ever.
	assert.Equal(t, http.StatusOK, do(t, "PUT", c.url(f, "/v1/jobs/a"), []byte(simpleJob)).status)
	assert.Equal(t, http.StatusConflict, do(t, "PUT", c.url(f, "/v1/jobs/a"), []byte(one)).status)
}

func TestQuotaError(t *testing.T) {
	h := quotas{jobs: 10, execs: 100, specBytes: 1000}
	job := func(execs int, bytes int64) quotas { return quotas{jobs: 1, execs: execs, specBytes: bytes} }
	require.NoError(t, quotaError(h, job(50, 500), quotas{}), "no quota")
	require.NoError(t, quotaError(quotas{jobs: 9, execs: 100, specBytes: 1000}, job(50, 500), quotas{jobs: 10, execs: 150, specBytes: 1500}))
	require.ErrorContains(t, quotaError(h, job(50, 500), quotas{jobs: 10}), "--max-jobs")
	require.NoError(t, quotaError(h, quotas{execs: 1}, quotas{jobs: 10}), "more room for a job already counted is no new job")
	require.ErrorContains(t, quotaError(quotas{execs: 101}, job(50, 0), quotas{execs: 150}), "--max-executions")
	require.ErrorContains(t, quotaError(h, job(0, 501), quotas{specBytes: 1500}), "quota reached: the cluster's job specs take 1000 bytes, and this job's 501 would pass --max-spec-bytes (1500)")
}

// The specs' footprints are a quota too: a submit whose spec would pass
// --max-spec-bytes gets 429 naming it, and the room comes back when an
// ended job is forgotten.
func TestSpecBytesQuotaRefusesSubmits(t *testing.T) {
	spec, err := jobspec.Parse([]byte(simpleJob))
	require.NoError(t, err)
	fp := spec.Footprint()
	c := newTestCluster(t, 3, func(cfg *Config) {
		cfg.MaxSpecBytes = 2*fp + fp/2
		cfg.JobRetention = 200 * time.Millisecond
	})
	c.leader()
	f := c.follower()
	requireAccepted(t, do(t, "PUT", c.url(f, "/v1/jobs/a"), []byte(simpleJob)))
	requireAccepted(t, do(t, "PUT", c.url(f, "/v1/jobs/b"), []byte(simpleJob)))
	r := do(t, "PUT", c.url(f, "/v1/jobs/c"), []byte(simpleJob))
	require.Equal(t, http.StatusTooManyRequests, r.status, "%s", r.body)
	assert.Contains(t, string(r.body), fmt.Sprintf("quota reached: the cluster's job specs take %d bytes, and this job's %d would pass --max-spec-bytes (%d)", 2*fp, fp, 2*fp+fp/2))
	// A job already there is no new one.
	assert.Equal(t, http.StatusOK, do(t, "PUT", c.url(f, "/v1/jobs/a"), []byte(simpleJob)).status)
	require.Equal(t, http.StatusAccepted, do(t, "POST", c.url(f, "/v1/jobs/a/cancel"), nil).status)
	waitFor(t, "the ended job to be forgotten, and its spec's room to come back", func() bool {
		return do(t, "PUT", c.url(f, "/v1/jobs/c"), []byte(simpleJob)).status == http.StatusCreated
	})
	waitFor(t, "every master to count two specs", func() bool {
		for _, m := range c.masters {
			var n int64
			m.FSM().Read(func(st *fsm.State) { n = st.SpecBytes() })
			if n != 2*fp {
				return false
			}
		}
		return true
	})
}

// A restore body is bounded, and its header's counts are checked against
// its size: neither a large body nor a header bomb reaches a master's
// memory.
func TestRestoreBounds(t *testing.T) {
	c := newTestCluster(t, 3, func(cfg *Config) { cfg.MaxSnapshotBytes = 64 << 10 })
	c.leader()
	requireAccepted(t, do(t, "PUT", c.url(0, "/v1/jobs/keep"), []byte(simpleJob)))
	f := c.follower()
	// A 40-odd-byte snapshot that claims 1e11 executions.
	st := fsm.NewState()
	var buf bytes.Buffer
	_, err := st.Capture().WriteTo(&buf)
	require.NoError(t, err)
	bomb := bytes.Replace(buf.Bytes(), []byte("\xa5execs\x00"), []byte("\xa5execs\xcf\x00\x00\x00\x17\x48\x76\xe8\x00"), 1)
	require.NotEqual(t, buf.Bytes(), bomb, "the header has an execs field to inflate")
	r := do(t, "PUT", c.url(f, "/v1/operator/snapshot"), bomb)
	require.Equal(t, http.StatusBadRequest, r.status, "%s", r.body)
	assert.Contains(t, string(r.body), "it claims 100000000000 executions")
	r = do(t, "PUT", c.url(f, "/v1/operator/snapshot"), bytes.Repeat([]byte{0}, 65<<10))
	require.Equal(t, http.StatusRequestEntityTooLarge, r.status, "%s", r.body)
	assert.Contains(t, string(r.body), "snapshot larger than 65536 bytes (--max-snapshot-bytes)")
	require.Equal(t, http.StatusOK, do(t, "GET", c.url(0, "/v1/jobs/keep"), nil).status, "nothing changed")
}

// With TLS, only a server certificate sets the hop count: a user's request
// that claims to have come a long way is still relayed to the leader.
func TestHopCountNeedsAServerCertificate(t *testing.T) {
	c := newTLSCluster(t, 3)
	f := c.follower()
	for _, role := range []pki.Role{"", pki.Client} {
		hc := c.client(role, "alice")
		url := func(path string) string { return transport.URL(hc, c.masters[f].HTTPAddr(), path) }
		start := time.Now()
		req, err := http.NewRequest(http.MethodPut, url("/v1/jobs/far-"+string(role)), strings.NewReader(simpleJob))
		require.NoError(t, err)
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set(hopsHeader, "3")
		resp, err := hc.Do(req)
		require.NoError(t, err)
		resp.Body.Close()
		assert.Contains(t, []int{http.StatusCreated, http.StatusOK}, resp.StatusCode)
		assert.Less(t, time.Since(start), 3*time.Second, "forwarded at once, not held until no leader is found")
		// A restore that says it was forwarded already goes to the leader
		// (which refuses this one as no snapshot) rather than a 503.
		req, err = http.NewRequest(http.MethodPut, url("/v1/operator/snapshot"), strings.NewReader("not a snapshot"))
		require.NoError(t, err)
		req.Header.Set("Content-Type", transport.BinaryType)
		req.Header.Set(hopsHeader, "1")
		resp, err = hc.Do(req)
		require.NoError(t, err)
		resp.Body.Close()
		assert.Equal(t, http.StatusBadRequest, resp.StatusCode)
	}
}

// An event stream ends once its token is deleted: the events that follow
// the delete do not reach it, and its reader's next request is refused.
func TestEventStreamEndsWhenItsTokenIsDeleted(t *testing.T) {
	c, _ := aclCluster(t, func(cfg *Config) { cfg.EventHeartbeat = 50 * time.Millisecond })
	l, f := c.leader(), c.follower()
	root := tokenOf(t, do(t, "POST", c.url(l, "/v1/acl/bootstrap"), nil))
	reader := tokenOf(t, do(t, "POST", c.url(l, "/v1/acl/tokens"), []byte(`{"name":"r","policy":"read"}`), auth(root.SecretID)...))
	waitFor(t, "the follower to know the token", func() bool {
		return do(t, "GET", c.url(f, "/v1/jobs?stale"), nil, auth(reader.SecretID)...).status == http.StatusOK
	})
	next, resp := stream(t, c.url(f, "/v1/events?topic=job"), auth(reader.SecretID)...)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	requireAccepted(t, do(t, "PUT", c.url(l, "/v1/jobs/before"), []byte(simpleJob), auth(root.SecretID)...))
	require.Equal(t, "before", until(t, next, func(e api.Event) bool { return e.Job == "before" })[0].Job)

	require.Equal(t, http.StatusOK, do(t, "DELETE", c.url(l, "/v1/acl/tokens/"+reader.AccessorID), nil, auth(root.SecretID)...).status)
	requireAccepted(t, do(t, "PUT", c.url(l, "/v1/jobs/after"), []byte(simpleJob), auth(root.SecretID)...))
	for l := next(); l != ""; l = next() {
		require.NotEqual(t, "after", parseEvent(t, l).Job, "an event after the token's delete reached its stream")
	}
	require.Equal(t, http.StatusUnauthorized, do(t, "GET", c.url(f, "/v1/events"), nil, auth(reader.SecretID)...).status)
}

// An answer that carries a token's secret is neither cached nor sniffed,
// nor is any other answer of the API.
func TestAnswersAreNotCached(t *testing.T) {
	c, _ := aclCluster(t)
	l := c.leader()
	boot := do(t, "POST", c.url(l, "/v1/acl/bootstrap"), nil)
	root := tokenOf(t, boot)
	created := do(t, "POST", c.url(l, "/v1/acl/tokens"), []byte(`{"name":"r","policy":"read"}`), auth(root.SecretID)...)
	tokenOf(t, created)
	for _, r := range []httpResult{boot, created, do(t, "GET", c.url(l, "/v1/jobs"), nil, auth(root.SecretID)...), do(t, "GET", c.url(l, "/v1/jobs"), nil)} {
		require.Equal(t, "no-store", r.header.Get("Cache-Control"))
		require.Equal(t, "nosniff", r.header.Get("X-Content-Type-Options"))
	}
}

// A master started without --acl in a cluster whose ACLs are bootstrapped
// says so, once, at ERROR: it answers every request without a token.
func TestMasterWithoutACLInAnACLClusterSaysSo(t *testing.T) {
	c, logs := aclCluster(t, func(cfg *Config) { cfg.ACL = cfg.NodeID != "m3" })
	// The bootstrap must reach a leader with ACLs on: m3 hands its
	// leadership over if it has it.
	if l := c.leader(); c.masters[l].ID() == "m3" {
		require.NoError(t, c.masters[l].Raft().LeadershipTransfer().Error())
	}
	var l int
	waitFor(t, "a leader other than m3", func() bool {
		for i, m := range c.masters {
			if m.ID() != "m3" && m.IsLeader() {
				l = i
				return true
			}
		}
		return false
	})
	const warn = "this master runs without --acl in a cluster whose ACLs are bootstrapped"
	require.NotContains(t, logs.String(), warn, "before the bootstrap")
	tokenOf(t, do(t, "POST", c.url(l, "/v1/acl/bootstrap"), nil))
	waitFor(t, "m3's warning", func() bool { return strings.Contains(logs.String(), warn) })
	for _, line := range strings.Split(logs.String(), "\n") {
		if strings.Contains(line, warn) {
			require.Contains(t, line, "level=ERROR")
			require.Contains(t, line, "node=m3")
		}
	}
	require.Equal(t, 1, strings.Count(logs.String(), warn))
}

// A master that does not know a token yet (it restarted and is catching
// up, or the token is a moment old) serves what it serves itself if the
// leader has the token: the leader's word stands until this master has
// applied as far as the leader had; from then on its own state decides.
// A token the leader does not have either stays refused.
func TestAMasterBehindAsksTheLeaderForATokenItServesItself(t *testing.T) {
	c, _ := aclCluster(t)
	l := c.leader()
	root := tokenOf(t, do(t, "POST", c.url(l, "/v1/acl/bootstrap"), nil))
	body, _ := json.Marshal(api.ACLTokenRequest{Name: "dashboard", Policy: "read"})
	reader := tokenOf(t, do(t, "POST", c.url(l, "/v1/acl/tokens"), body, auth(root.SecretID)...))

	// A master that has applied nothing yet: its leader is the cluster's.
	behind := &Master{cfg: Config{ACL: true}, log: slog.New(slog.DiscardHandler), fsm: fsm.New(),
		client: http.DefaultClient, tokenAsks: make(chan struct{}, maxTokenAsks),
		leaderForTokens: func() (string, string) { return c.masters[l].HTTPAddr(), c.masters[l].ID() }}
	req := func(secret, target string) *http.Request {
		r := httptest.NewRequest("GET", target, nil)
		r.Header.Set("X-Jobmaster-Token", secret)
		return r
	}
	route := acl.Route{Method: "GET", Pattern: "/v1/state/hash"}
	w := httptest.NewRecorder()
	r, ok := behind.authorize(w, req(reader.SecretID, "/v1/state/hash"), route)
	require.True(t, ok, "%d %s", w.Code, w.Body)
	cl := callerOf(r)
	require.NotNil(t, cl)
	assert.False(t, cl.unverified)
	assert.Equal(t, "dashboard", cl.token.Name)
	assert.Positive(t, cl.vouchedUntil)
	assert.True(t, behind.stillAllowed(r), "before this master applied as far as the leader had")

	// The leader's policy stands: read may not write.
	w = httptest.NewRecorder()
	_, ok = behind.authorize(w, req(reader.SecretID, "/v1/operator/snapshot"), acl.Route{Method: "PUT", Pattern: "/v1/operator/snapshot"})
	require.False(t, ok)
	assert.Equal(t, http.StatusForbidden, w.Code, "%s", w.Body)

	// A token nobody has; the leader is not asked again about it until
	// this master applies another entry.
	w = httptest.NewRecorder()
	_, ok = behind.authorize(w, req("never-created", "/v1/state/hash"), route)
	require.False(t, ok)
	assert.Equal(t, http.StatusUnauthorized, w.Code)
	assert.True(t, behind.tokenRefusals.said(secretHash("never-created"), behind.appliedIndex()))

	// With as many questions in flight as it may ask, a token it does not
	// know is not refused as unknown: it is asked to come back.
	for range maxTokenAsks {
		behind.tokenAsks <- struct{}{}
	}
	w = httptest.NewRecorder()
	_, ok = behind.authorize(w, req("another-not-here-yet", "/v1/state/hash"), route)
	require.False(t, ok)
	assert.Equal(t, http.StatusServiceUnavailable, w.Code, "%s", w.Body)
	assert.Equal(t, "1", w.Header().Get("Retry-After"))
	for range maxTokenAsks {
		<-behind.tokenAsks
	}

	// Once this master has applied as far, without the token (deleted
	// meanwhile, say), its own state decides.
	behind.fsm.ApplyBatch([]*raft.Log{{Index: cl.vouchedUntil, Type: raft.LogNoop}})
	assert.False(t, behind.stillAllowed(r), "after this master applied as far as the leader had")

	// The leader answers only masters' questions about tokens it has, and
	// only as the leader.
	assert.Equal(t, http.StatusBadRequest, do(t, "GET", c.url(l, tokenPath+"?hash=xyz"), nil).status)
	assert.Equal(t, http.StatusNotFound, do(t, "GET", c.url(l, tokenPath+"?hash="+secretHash("never-created")), nil).status)
	assert.Equal(t, http.StatusServiceUnavailable, do(t, "GET", c.url(c.follower(), tokenPath+"?hash="+secretHash(reader.SecretID)), nil).status)
}

// Jobs submitted at once keep the quota exactly, wide or not, however many
// arrive together, at the leader and through followers: each check counts
// what the others admitted and have not applied yet.
func TestWideSubmitsAtOnceKeepTheQuota(t *testing.T) {
	c := newTestCluster(t, 3, func(cfg *Config) { cfg.MaxExecutions = 50_000 })
	l := c.leader()
	for _, tc := range []struct {
		spec           string
		n, subtasks    int
		accepted, want int // jobs, executions after
	}{
		{`{"vertices":[{"id":"a","parallelism":10000,"command":["true"]},{"id":"b","parallelism":10000,"command":["true"]}]}`, 6, 20_000, 2, 40_000},
		{`{"vertices":[{"id":"a","parallelism":9000,"command":["true"]}]}`, 6, 9_000, 1, 49_000},
		{`{"vertices":[{"id":"a","parallelism":1000,"command":["true"]}]}`, 6, 1_000, 1, 50_000},
	} {
		codes := make([]int, tc.n)
		var wg sync.WaitGroup
		for i := range codes {
			wg.Go(func() {
				codes[i] = do(t, "PUT", c.url(i%3, fmt.Sprintf("/v1/jobs/wide%d-%d", tc.subtasks, i)), []byte(tc.spec)).status
			})
		}
		wg.Wait()
		accepted := 0
		for _, code := range codes {
			switch code {
			case http.StatusCreated:
				accepted++
			case http.StatusTooManyRequests:
			default:
				t.Fatalf("answers %v", codes)
			}
		}
		assert.Equal(t, tc.accepted, accepted, "jobs of %d subtasks: answers %v", tc.subtasks, codes)
		var execs int
		c.masters[l].fsm.Read(func(st *fsm.State) { execs = st.NumExecutions() })
		assert.Equal(t, tc.want, execs)
	}
}

// A submission whose caller stops waiting keeps its place in the quota
// until its entry has applied or failed: callers that give up at once
// (their proposals queued, their contexts ended before the commit)
// cannot together pass it.
func TestCallersThatLeaveDoNotPassTheQuota(t *testing.T) {
	c := newTestCluster(t, 1, func(cfg *Config) { cfg.MaxJobs = 3 })
	m := c.masters[c.leader()]
	spec := mustSpec(t, simpleJob)
	var wg sync.WaitGroup
	for i := range 40 {
		wg.Go(func() {
			// Queued at once, given up before the commit.
			ctx, cancel := context.WithTimeout(context.Background(), time.Millisecond)
			defer cancel()
			_, _ = m.decideSubmissions(ctx, m.currentSession(), []submission{{ID: fmt.Sprintf("gone-%d", i), Spec: spec}}, nil)
		})
	}
	wg.Wait()
	c.waitSameState()
	var jobs int
	m.fsm.Read(func(st *fsm.State) { jobs = st.NumJobs() })
	require.LessOrEqual(t, jobs, 3)
}

// A retry of a job in flight holds its place in the quota as long as
// either submission is in flight: the first one settling without the job
// (its caller gone, its entry failed) does not free it. So with a quota of
// one job, and with a quota of one spec's footprint.
func TestARetryInFlightHoldsTheJobsPlace(t *testing.T) {
	spec := mustSpec(t, simpleJob)
	for name, limits := range map[string]quotas{"jobs": {jobs: 1}, "spec bytes": {specBytes: spec.Footprint()}} {
		t.Run(name, func(t *testing.T) {
			var q quotaLedger
			f := fsm.New()
			sub := func(id string) []submission { return []submission{{ID: id, Spec: spec}} }
			admit := func(id string) ([]int, func()) {
				return q.admit(f, sub(id), []int{0}, limits, func(int, error) {})
			}
			in, releaseFirst := admit("x")
			require.Len(t, in, 1)
			in, releaseRetry := admit("x")
			require.Len(t, in, 1, "a retry of a job in flight is admitted")
			releaseFirst()
			in, _ = admit("y")
			require.Empty(t, in, "x still holds the only place")
			releaseRetry()
			in, _ = admit("y")
			require.Len(t, in, 1, "x settled without the job: its place is free")
		})
	}
}

// Every method a route serves has its need in the ACL table (acl.Routes,
// a HEAD that of its GET): none falls to the table's default, and the
// table names no route the router does not serve.
func TestEveryServedRouteHasANeed(t *testing.T) {
	c := newTestCluster(t, 1)
	rt := c.masters[0].router()
	served := map[acl.Route]bool{}
	for pattern, methods := range rt.served {
		for _, method := range methods {
			served[acl.Route{Method: method, Pattern: pattern}] = true
			if method == http.MethodHead {
				continue
			}
			_, ok := acl.Routes[acl.Route{Method: method, Pattern: pattern}]
			assert.True(t, ok, "%s %s is served, and not in acl.Routes", method, pattern)
		}
	}
	for r := range acl.Routes {
		if r.Pattern != acl.CatchAll {
			assert.True(t, served[r], "acl.Routes has %s %s, which no route serves", r.Method, r.Pattern)
		}
	}
}

// A method a route does not serve is a 405, and a path no route serves a
// 404, whether or not the request has a token: there is nothing to
// authorize.
func TestWrongMethodsAre405BeforeAnyToken(t *testing.T) {
	c := newTestCluster(t, 1, func(cfg *Config) { cfg.ACL = true })
	l := c.leader()
	for _, x := range []struct {
		method, path string
		want         int
		allow        string
	}{
		{"POST", "/v1/health", http.StatusMethodNotAllowed, "GET, HEAD"},
		{"DELETE", "/v1/jobs/x", http.StatusMethodNotAllowed, "GET, HEAD, PUT"},
		{"DELETE", "/", http.StatusMethodNotAllowed, "GET, HEAD"},
		{"POST", "/ui/", http.StatusMethodNotAllowed, "GET, HEAD"},
		{"GET", "/v1/nothing", http.StatusNotFound, ""},
		{"GET", "/v1/jobs", http.StatusUnauthorized, ""}, // served: a token is needed
		{"DELETE", "/v1/jobs/" + strings.Repeat("x", 60_000), http.StatusMethodNotAllowed, "GET, HEAD, PUT"},
	} {
		req, err := http.NewRequest(x.method, c.url(l, x.path), nil)
		require.NoError(t, err)
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		assert.Less(t, len(body), 1000, "the path is not echoed whole")
		assert.Equal(t, x.want, resp.StatusCode, "%.60s %.60s", x.method, x.path)
		assert.Equal(t, x.allow, resp.Header.Get("Allow"), "%s %s", x.method, x.path)
	}
}

// A submission whose token a follower does not know goes to the leader as
// it came, which refuses the token before the spec is read: an unknown
// token buys no parsing of a body on any master (a megabyte of empty
// vertices cost a follower 137 MB and two seconds to refuse).
func TestAnUnknownTokensSubmissionIsNotReadBeforeTheLeaderChecksIt(t *testing.T) {
	c, _ := aclCluster(t)
	f := c.follower()
	tokenOf(t, do(t, "POST", c.url(f, "/v1/acl/bootstrap"), nil))
	for _, x := range []struct{ method, path string }{{"PUT", "/v1/jobs/j1"}, {"POST", "/v1/jobs"}} {
		r := do(t, x.method, c.url(f, x.path), []byte(`{"vertices": [{"parallelism": "many"}]}`), auth("not-a-token")...)
		require.Equal(t, http.StatusUnauthorized, r.status, "%s %s: %s", x.method, x.path, r.body)
		assert.Contains(t, string(r.body), "ACL token not found")
	}
}

// A snapshot taken before the ACL bootstrap does not replace the state of
// a cluster bootstrapped since unless the restore asks to reset the ACLs:
// restored, anyone could bootstrap them again.
func TestARestoreDoesNotResetTheACLsUnasked(t *testing.T) {
	plain := newTestCluster(t, 1)
	r := do(t, "GET", plain.url(plain.leader(), "/v1/operator/snapshot"), nil)
	require.Equal(t, http.StatusOK, r.status, "%s", r.body)
	before := r.body

	c := newTestCluster(t, 1, func(cfg *Config) { cfg.ACL = true })
	l := c.leader()
	root := tokenOf(t, do(t, "POST", c.url(l, "/v1/acl/bootstrap"), nil))
	r = do(t, "PUT", c.url(l, "/v1/operator/snapshot"), before, auth(root.SecretID)...)
	require.Equal(t, http.StatusConflict, r.status, "%s", r.body)
	assert.Contains(t, string(r.body), "the snapshot was taken before this cluster's ACL bootstrap")
	assert.Contains(t, string(r.body), "--reset-acl")
	assert.Equal(t, http.StatusConflict, do(t, "POST", c.url(l, "/v1/acl/bootstrap"), nil).status, "nothing was restored")

	r = do(t, "PUT", c.url(l, "/v1/operator/snapshot?reset_acl=true"), before, auth(root.SecretID)...)
	require.Equal(t, http.StatusOK, r.status, "%s", r.body)
	assert.True(t, decode[api.SnapshotRestored](t, r).ACLReset, "the answer says the ACLs may be bootstrapped")
	waitFor(t, "the ACLs bootstrapped again", func() bool {
		return do(t, "POST", c.url(c.leader(), "/v1/acl/bootstrap"), nil).status == http.StatusCreated
	})
}

// A second submission of a job in flight with another spec is no plain
// retry: should the first caller leave, it creates the job, so the room it
// needs beyond the first's is checked against the quotas, and held.
func TestAConflictingRetryInFlightIsChecked(t *testing.T) {
	small := mustSpec(t, simpleJob)
	big := mustSpec(t, `{"vertices":[{"id":"v","parallelism":5000,"command":["x","`+strings.Repeat("y", 100_000)+`"]}]}`)
	var q quotaLedger
	f := fsm.New()
	limits := quotas{execs: 100, specBytes: 2 * small.Footprint()}
	in, releaseFirst := q.admit(f, []submission{{ID: "x", Spec: small}}, []int{0}, limits, func(int, error) {})
	require.Len(t, in, 1)
	var refused error
	in, _ = q.admit(f, []submission{{ID: "x", Spec: big}}, []int{0}, limits, func(_ int, err error) { refused = err })
	require.Empty(t, in)
	require.ErrorContains(t, refused, "--max-executions")
	// One within the quotas holds the larger place.
	wider := mustSpec(t, `{"vertices":[{"id":"v","parallelism":3,"command":["true"]}]}`)
	in, releaseSecond := q.admit(f, []submission{{ID: "x", Spec: wider}}, []int{0}, limits, func(int, error) {})
	require.Len(t, in, 1)
	releaseFirst()
	require.Equal(t, 3, q.pending["x"].subtasks, "the place held is the larger one's, as long as either is in flight")
	releaseSecond()
	require.Empty(t, q.pending)
}
