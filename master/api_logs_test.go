package master

import (
	"errors"
	"net/http"
	"net/url"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"jobmaster/api"
	"jobmaster/fsm"
	"jobmaster/membership"
	"jobmaster/wire"
)

func TestParseLogQuery(t *testing.T) {
	for _, c := range []struct {
		query string
		want  logQuery // compared when err is ""
		err   string
	}{
		{query: "execution=j/v/0/0", want: logQuery{job: "j", execution: "j/v/0/0", vertex: "v", stream: "stdout", tail: api.LogTailDefault}},
		{query: "execution=j/v/3/12&stream=stderr&tail=0&follow=1",
			want: logQuery{job: "j", execution: "j/v/3/12", vertex: "v", subtask: 3, attempt: 12, stream: "stderr", tail: 0, follow: true}},
		{query: "execution=j/v/0/0&stream=stdout&tail=16777216&follow=0",
			want: logQuery{job: "j", execution: "j/v/0/0", vertex: "v", stream: "stdout", tail: api.LogTailMax}},
		{query: "", err: "missing query parameter execution"},
		{query: "execution=", err: "missing query parameter execution"},
		{query: "execution=j/v/0", err: `execution "j/v/0": want an execution id`},
		{query: "execution=j/v/0/0/1", err: "want an execution id"},
		{query: "execution=other/v/0/0", err: `execution "other/v/0/0" is not of job "j"`},
		{query: "execution=j/a%20b/0/0", err: "vertex:"},
		{query: "execution=j/v/-1/0", err: `subtask "-1" is no subtask index`},
		{query: "execution=j/v/01/0", err: `subtask "01" is no subtask index`},
		{query: "execution=j/v/0/x", err: `attempt "x" is no attempt number`},
		{query: "execution=j/v/0/99999999999999999999", err: "is no attempt number"},
		{query: "execution=j/v/0/0&execution=j/v/1/0", err: "query parameter execution given 2 times"},
		{query: "execution=j/v/0/0&stream=both", err: `stream "both": want stdout or stderr`},
		{query: "execution=j/v/0/0&tail=-1", err: `tail "-1": want a number of bytes`},
		{query: "execution=j/v/0/0&tail=1k", err: `tail "1k"`},
		{query: "execution=j/v/0/0&tail=16777217", err: "tail 16777217: a master relays at most the last 16777216 bytes"},
		{query: "execution=j/v/0/0&follow=yes", err: `follow "yes": want 0 or 1`},
		{query: "execution=j/v/0/0&follow=1&follow=1", err: "follow given 2 times"},
	} {
		q, err := url.ParseQuery(c.query)
		require.NoError(t, err, c.query)
		got, err := parseLogQuery("j", q)
		if c.err != "" {
			require.ErrorContains(t, err, c.err, c.query)
			continue
		}
		require.NoError(t, err, c.query)
		require.Equal(t, c.want, got, c.query)
	}
}

func TestPlanLogs(t *testing.T) {
	q := func(id string) logQuery {
		v, err := parseLogQuery("j", url.Values{"execution": {id}})
		require.NoError(t, err)
		return v
	}
	attempts := func(cur fsm.Execution, prev fsm.PreviousAttempt) logLookup {
		return logLookup{job: true, SubtaskAttempts: fsm.SubtaskAttempts{Vertices: []string{"a", "v"}, Parallelism: 2,
			Current: cur, HasCurrent: true, Previous: prev}}
	}
	// Subtask v/1 at attempt 3, placed on e2; attempt 2 ran on e1.
	restarted := attempts(fsm.Execution{Attempt: 3, Executor: "e2", State: wire.StateRunning},
		fsm.PreviousAttempt{Attempt: 2, State: wire.StateFailed, Executor: "e1"})
	for _, c := range []struct {
		name   string
		q      logQuery
		l      logLookup
		want   logPlan
		status int
		msg    string
	}{
		{name: "unknown job", q: q("j/v/0/0"), l: logLookup{},
			status: http.StatusNotFound, msg: `job "j" not found`},
		{name: "current, never placed", q: q("j/v/0/0"), l: attempts(fsm.Execution{State: wire.StateScheduled}, fsm.PreviousAttempt{}),
			status: http.StatusConflict, msg: "execution j/v/0/0 has not been placed on an executor yet (it is SCHEDULED)"},
		{name: "current, placed", q: q("j/v/0/0"), l: attempts(fsm.Execution{Executor: "e1", State: wire.StateRunning}, fsm.PreviousAttempt{}),
			want: logPlan{executor: "e1", state: wire.StateRunning}},
		{name: "current, ended", q: q("j/v/0/0"), l: attempts(fsm.Execution{Executor: "e1", State: wire.StateFailed}, fsm.PreviousAttempt{}),
			want: logPlan{executor: "e1", state: wire.StateFailed}},
		{name: "no such vertex", q: q("j/x/0/0"), l: logLookup{job: true, SubtaskAttempts: fsm.SubtaskAttempts{Vertices: []string{"a", "v"}}},
			status: http.StatusNotFound, msg: `job "j" has no vertex "x" (its vertices: a, v)`},
		{name: "no such subtask", q: q("j/v/2/0"), l: restarted,
			status: http.StatusNotFound, msg: `vertex "v" of job "j" has no subtask 2 (it has subtasks 0 to 1)`},
		{name: "an attempt not made", q: q("j/v/1/4"), l: restarted,
			status: http.StatusNotFound, msg: `execution j/v/1/4 not found: subtask v/1 of job "j" is at attempt 3`},
		{name: "the attempt before the current one: its executor, no other", q: q("j/v/1/2"), l: restarted,
			want: logPlan{executor: "e1", earlier: true}},
		{name: "the attempt before the current one, which the current one's executor ran too", q: q("j/v/1/2"),
			l:    attempts(fsm.Execution{Attempt: 3}, fsm.PreviousAttempt{Attempt: 2, State: wire.StateCanceled, Executor: "e2"}),
			want: logPlan{executor: "e2", earlier: true}},
		{name: "an older attempt: no executor is searched", q: q("j/v/1/1"), l: restarted,
			status: http.StatusNotFound, msg: "execution j/v/1/1 is neither the current attempt of subtask v/1 of job \"j\" (3) nor the one before it (2): " +
				"the masters know only where the attempt before the current one ran; read older ones from the executors: jobmaster job logs j v 1 --attempt 1"},
		{name: "the attempt before, its executor not recorded (an earlier release, or never placed)", q: q("j/v/1/2"),
			l:      attempts(fsm.Execution{Attempt: 3, Executor: "e2"}, fsm.PreviousAttempt{Attempt: 2, State: wire.StateFailed}),
			status: http.StatusNotFound, msg: "execution j/v/1/2, the attempt before the current one, has no executor in the masters' state"},
		{name: "a job under a reused id, at its first attempt: the attempts below are the job before it's", q: q("j/v/1/4"),
			l:      attempts(fsm.Execution{Attempt: 7, Executor: "e2"}, fsm.PreviousAttempt{}),
			status: http.StatusNotFound, msg: "execution j/v/1/4 is neither the current attempt of subtask v/1 of job \"j\" (7) nor the one before it: the masters know only"},
	} {
		got := planLogs(c.q, c.l)
		if c.status != 0 {
			require.Equal(t, c.status, got.status, c.name)
			require.Contains(t, got.msg, c.msg, c.name)
			continue
		}
		require.Equal(t, c.want, got, c.name)
	}
}

func TestTargetOf(t *testing.T) {
	member := func(id, role, addr, status string) membership.Member {
		return membership.Member{ID: id, Status: status, Meta: membership.Meta{Role: role, HTTPAddr: addr}}
	}
	members := []membership.Member{
		member("e1", membership.RoleExecutor, "127.0.0.1:1", membership.StatusAlive),
		member("e2", membership.RoleExecutor, "127.0.0.1:2", membership.StatusDead),
		member("e4", membership.RoleExecutor, "", membership.StatusAlive),
		member("m1", membership.RoleMaster, "127.0.0.1:9", membership.StatusAlive),
	}
	// The executor the state names, whatever gossip says of it.
	got, ok := targetOf(logPlan{executor: "e2"}, members)
	require.True(t, ok)
	require.Equal(t, logTarget{id: "e2", addr: "127.0.0.1:2", status: membership.StatusDead}, got)
	got, ok = targetOf(logPlan{executor: "e1", earlier: true}, members)
	require.True(t, ok)
	require.Equal(t, "e1", got.id)
	for _, id := range []string{"e9", "m1", "e4", ""} {
		_, ok := targetOf(logPlan{executor: id}, members)
		require.False(t, ok, "%q: unknown to gossip, no executor, or without an address", id)
	}
}

func TestLogFailure(t *testing.T) {
	q, err := parseLogQuery("j", url.Values{"execution": {"j/v/0/1"}})
	require.NoError(t, err)
	e1 := logTarget{id: "e1", addr: "127.0.0.1:7431", status: membership.StatusDead}
	for _, c := range []struct {
		name   string
		p      logPlan
		asked  *logAsked
		status int
		msg    string
	}{
		{"the executor unknown to gossip", logPlan{executor: "e1", state: wire.StateRunning}, nil,
			http.StatusBadGateway, "executor e1, which runs or ran j/v/0/1, is not known to this master's gossip: it is gone, and the log with it"},
		{"the executor of the attempt before, unknown to gossip", logPlan{executor: "e1", earlier: true}, nil,
			http.StatusBadGateway, "executor e1, which ran j/v/0/1, is not known to this master's gossip"},
		{"the executor does not answer", logPlan{executor: "e1", state: wire.StateRunning}, &logAsked{target: e1, err: errors.New("connection refused")},
			http.StatusBadGateway, "executor e1 at 127.0.0.1:7431, which runs or ran j/v/0/1, does not answer (gossip says it is dead): connection refused"},
		{"not on the executor yet", logPlan{executor: "e1", state: wire.StateDeploying}, &logAsked{target: e1, status: http.StatusNotFound},
			http.StatusConflict, "execution j/v/0/1 has not started on executor e1 yet (it is DEPLOYING)"},
		{"deleted on the executor", logPlan{executor: "e1", state: wire.StateFinished}, &logAsked{target: e1, status: http.StatusNotFound},
			http.StatusNotFound, "executor e1 no longer has the log of j/v/0/1: it deletes a task's directory --gc-retention after the task ended"},
		{"the attempt before, deleted on its executor", logPlan{executor: "e1", earlier: true}, &logAsked{target: e1, status: http.StatusNotFound},
			http.StatusNotFound, "executor e1 no longer has the log of j/v/0/1"},
		{"refused by the executor", logPlan{executor: "e1", state: wire.StateRunning}, &logAsked{target: e1, status: http.StatusForbidden, msg: "no certificate"},
			http.StatusBadGateway, "executor e1 refused the log of j/v/0/1: HTTP 403: no certificate"},
	} {
		status, msg := logFailure(q, c.p, c.asked)
		assert.Equal(t, c.status, status, c.name)
		assert.Contains(t, msg, c.msg, c.name)
	}
}

// The route on a cluster without executors: a read token may not read a
// log, and is told why; a submit token gets the answers of the state (a
// job's subtasks never placed, an attempt not made, an unknown job), from
// a follower and from another master's page alike; bad parameters are
// 400s naming them.
func TestTaskLogsRoute(t *testing.T) {
	c, _ := aclCluster(t)
	l, f := c.leader(), c.follower()
	root := tokenOf(t, do(t, "POST", c.url(l, "/v1/acl/bootstrap"), nil))
	reader := tokenOf(t, do(t, "POST", c.url(l, "/v1/acl/tokens"), []byte(`{"name":"dashboard","policy":"read"}`), auth(root.SecretID)...))
	submitter := tokenOf(t, do(t, "POST", c.url(l, "/v1/acl/tokens"), []byte(`{"name":"ci","policy":"submit"}`), auth(root.SecretID)...))
	requireAccepted(t, do(t, "PUT", c.url(l, "/v1/jobs/lg"), []byte(simpleJob), auth(root.SecretID)...))
	waitFor(t, "the job on the follower", func() bool {
		return do(t, "GET", c.url(f, "/v1/jobs/lg?stale"), nil, auth(root.SecretID)...).status == http.StatusOK
	})

	r := do(t, "GET", c.url(f, "/v1/jobs/lg/logs?execution=lg/v/0/0"), nil, auth(reader.SecretID)...)
	require.Equal(t, http.StatusForbidden, r.status, "%s", r.body)
	assert.Contains(t, string(r.body), `token \"dashboard\" (policy read) may not GET /v1/jobs/lg/logs: it needs a submit or management token`)
	assert.Contains(t, string(r.body), "not part of the read policy")
	r = do(t, "GET", c.url(f, "/v1/jobs/lg/logs?execution=lg/v/0/0"), nil)
	require.Equal(t, http.StatusUnauthorized, r.status, "%s", r.body)

	for _, x := range []struct {
		path   string
		status int
		msg    string
	}{
		{"/v1/jobs/lg/logs?execution=lg/v/0/0", http.StatusConflict, "execution lg/v/0/0 has not been placed on an executor yet (it is SCHEDULED)"},
		{"/v1/jobs/lg/logs?execution=lg/v/1/0&stream=stderr&follow=1", http.StatusConflict, "has not been placed"},
		{"/v1/jobs/lg/logs?execution=lg/v/0/3", http.StatusNotFound, `execution lg/v/0/3 not found: subtask v/0 of job \"lg\" is at attempt 0`},
		{"/v1/jobs/lg/logs?execution=lg/w/0/0", http.StatusNotFound, `job \"lg\" has no vertex \"w\" (its vertices: v)`},
		{"/v1/jobs/nope/logs?execution=nope/v/0/0", http.StatusNotFound, `job \"nope\" not found`},
		{"/v1/jobs/lg/logs", http.StatusBadRequest, "missing query parameter execution"},
		{"/v1/jobs/lg/logs?execution=lg/v/0/0&tial=5", http.StatusBadRequest, `unknown query parameter \"tial\": this endpoint takes execution, stream, tail, follow`},
		{"/v1/jobs/lg/logs?execution=lg/v/0/0&tail=99999999", http.StatusBadRequest, "a master relays at most the last 16777216 bytes"},
		{"/v1/jobs/lg/logs?execution=x/v/0/0", http.StatusBadRequest, `is not of job \"lg\"`},
		{"/v1/jobs/a%20b/logs?execution=x/v/0/0", http.StatusBadRequest, "job id:"},
	} {
		r := do(t, "GET", c.url(f, x.path), nil, auth(submitter.SecretID)...)
		require.Equal(t, x.status, r.status, "%s: %s", x.path, r.body)
		assert.Contains(t, string(r.body), x.msg, x.path)
	}
	r = do(t, "POST", c.url(f, "/v1/jobs/lg/logs?execution=lg/v/0/0"), nil, auth(submitter.SecretID)...)
	assert.Equal(t, http.StatusMethodNotAllowed, r.status, "%s", r.body)

	// From the page of another master: its answer is the page's to read.
	peer := "http://" + c.masters[l].HTTPAddr()
	r = do(t, "GET", c.url(f, "/v1/jobs/lg/logs?execution=lg/v/0/0"), nil, append(auth(reader.SecretID), "Origin", peer)...)
	assert.Equal(t, http.StatusForbidden, r.status, "%s", r.body)
	assert.Equal(t, peer, r.header.Get("Access-Control-Allow-Origin"), "the page reads why it was refused")
	assert.Contains(t, r.header.Get("Access-Control-Expose-Headers"), api.LogExecutorHeader)
	r = do(t, "OPTIONS", c.url(f, "/v1/jobs/lg/logs"), nil, "Origin", peer,
		"Access-Control-Request-Method", "GET", "Access-Control-Request-Headers", "x-jobmaster-token")
	assert.Equal(t, http.StatusNoContent, r.status, "%s", r.body)
	r = do(t, "GET", c.url(f, "/v1/jobs/lg/logs?execution=lg/v/0/0"), nil, append(auth(submitter.SecretID), "Origin", "http://evil.example")...)
	assert.Equal(t, http.StatusForbidden, r.status, "%s", r.body)
	assert.Empty(t, r.header.Get("Access-Control-Allow-Origin"))
}
