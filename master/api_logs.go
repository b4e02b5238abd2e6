package master

import (
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"jobmaster/api"
	"jobmaster/fsm"
	"jobmaster/jobspec"
	"jobmaster/membership"
	"jobmaster/strictjson"
	"jobmaster/wire"
)

// A task's log through a master: GET /v1/jobs/{id}/logs?execution=ID
// [&stream=stdout|stderr][&tail=N][&follow=1] (docs/api.md).
//
// Any master serves it from its own replicated state and never forwards
// it: the state names the executor an execution was placed on (a
// subtask's current attempt, or the one before it: fsm.PreviousAttempt),
// gossip the address that executor listens at. The master reads the
// executor's own log endpoint (wire.PathLogs) with its own client (with
// TLS: its server certificate, and an answer taken only from the
// certificate of the executor named: doExecutor) and copies the answer
// through. No other executor is asked: an older attempt's log is read
// from the executors (jobmaster job logs --attempt), not through the
// masters. The decisions are pure: parseLogQuery (the request), lookupLog
// and planLogs (what the state says, and whom to ask), targetOf (where,
// from gossip) and logFailure (the answer when the executor gave no log);
// taskLogs gathers their inputs and relayLog carries the bytes.
//
// A followed log's answer ends cleanly only when the log is complete: its
// task has ended and every byte was relayed, and it then carries the
// trailer X-Jobmaster-End: complete, as the executor's does. When the
// executor's answer breaks off, or this master stops, or the caller's
// token is deleted, the connection is broken off instead: a reader that
// cannot see trailers (a browser's fetch) still tells a complete log from
// a cut one.

// Bounds of the log reads a master relays (logLimits).
const (
	// maxLogRelays is how many log reads one master relays at once; more
	// are answered 503 (logrelays.go).
	maxLogRelays = 256
	// maxLogRelaysPerCaller is how many of them one caller (a token, or
	// with ACLs off an IP address) may have at once; more are answered
	// 429.
	maxLogRelaysPerCaller = 16
	// logAnswerTimeout bounds the wait for an executor's answer's headers.
	logAnswerTimeout = 10 * time.Second
	// logWriteTimeout bounds each write of a relayed log to its caller: a
	// reader that stops reading holds a relay no longer.
	logWriteTimeout = 30 * time.Second
	// logAtOnceTimeout bounds a whole log read at once (not followed),
	// the executor's answer included: an executor that trickles its bytes
	// holds a relay no longer.
	logAtOnceTimeout = time.Minute
	// logTokenCheck is how often a followed log checks that its caller's
	// token still allows it.
	logTokenCheck = time.Second
)

// logParams are the query parameters of a log read.
var logParams = []string{"execution", "stream", "tail", "follow"}

// logQuery is a log read's request, checked.
type logQuery struct {
	job       string
	execution string // <job>/<vertex>/<subtask>/<attempt>
	vertex    string
	subtask   int
	attempt   int
	stream    string // stdout or stderr
	tail      int64  // the last bytes of the log to send
	follow    bool
}

// parseLogQuery checks the query of a log read of job (takes has refused
// unknown parameters): each parameter at most once, an execution id of
// the job, a stream, a tail within api.LogTailMax (api.LogTailDefault when
// not given) and follow 0 or 1.
func parseLogQuery(job string, q url.Values) (logQuery, error) {
	lq := logQuery{job: job, stream: "stdout", tail: api.LogTailDefault}
	for _, k := range logParams {
		if len(q[k]) > 1 {
			return lq, fmt.Errorf("query parameter %s given %d times: give it once", k, len(q[k]))
		}
	}
	id := q.Get("execution")
	if id == "" {
		return lq, errors.New("missing query parameter execution: the execution id, <job>/<vertex>/<subtask>/<attempt>, as GET /v1/jobs/{id} lists it")
	}
	parts := strings.Split(id, "/")
	if len(parts) != 4 {
		return lq, fmt.Errorf("execution %q: want an execution id, <job>/<vertex>/<subtask>/<attempt>", strictjson.Short(id))
	}
	if parts[0] != job {
		return lq, fmt.Errorf("execution %q is not of job %q: read it under /v1/jobs/%s/logs", strictjson.Short(id), job, strictjson.Short(parts[0]))
	}
	if err := jobspec.CheckID(parts[1]); err != nil {
		return lq, fmt.Errorf("execution %q: vertex: %v", strictjson.Short(id), err)
	}
	sub, ok := parseIndex(parts[2])
	if !ok {
		return lq, fmt.Errorf("execution %q: subtask %q is no subtask index (0, 1, ...)", strictjson.Short(id), strictjson.Short(parts[2]))
	}
	att, ok := parseIndex(parts[3])
	if !ok {
		return lq, fmt.Errorf("execution %q: attempt %q is no attempt number (0, 1, ...)", strictjson.Short(id), strictjson.Short(parts[3]))
	}
	lq.execution, lq.vertex, lq.subtask, lq.attempt = id, parts[1], sub, att
	switch s := q.Get("stream"); s {
	case "", "stdout":
	case "stderr":
		lq.stream = s
	default:
		return lq, fmt.Errorf("stream %q: want stdout or stderr", strictjson.Short(s))
	}
	if s := q.Get("tail"); s != "" {
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil || n < 0 {
			return lq, fmt.Errorf("tail %q: want a number of bytes, from 0 to %d", strictjson.Short(s), api.LogTailMax)
		}
		if n > api.LogTailMax {
			return lq, fmt.Errorf("tail %d: a master relays at most the last %d bytes (16 MiB) of a log; read a whole log from its executor (jobmaster job logs)", n, api.LogTailMax)
		}
		lq.tail = n
	}
	switch s := q.Get("follow"); s {
	case "", "0":
	case "1":
		lq.follow = true
	default:
		return lq, fmt.Errorf("follow %q: want 0 or 1", strictjson.Short(s))
	}
	return lq, nil
}

// parseIndex parses a subtask index or attempt number: decimal digits, no sign,
// no leading zero, as execution ids write them.
func parseIndex(s string) (int, bool) {
	n, err := strconv.Atoi(s)
	return n, err == nil && n >= 0 && strconv.Itoa(n) == s
}

// logLookup is what the replicated state says of a log read's execution:
// whether its job exists, and what it knows of its subtask's attempts.
type logLookup struct {
	job bool
	fsm.SubtaskAttempts
}

// lookupLog reads what the state says of q's execution (State.AttemptsOf:
// the job's vertices, not a view of its subtasks).
func lookupLog(st *fsm.State, q logQuery) logLookup {
	return logLookup{job: st.HasJob(q.job), SubtaskAttempts: st.AttemptsOf(q.job, q.vertex, q.subtask)}
}

// logPlan is what a log read does: answer at once (status, msg), or ask
// the executor the state names for the log.
type logPlan struct {
	status int
	msg    string
	// executor is the executor to ask: the one the current attempt was
	// placed on, or, for the attempt before it (earlier), the one that
	// attempt ran on.
	executor string
	earlier  bool
	// state is the execution's when it is the current attempt: one placed
	// and not started yet (SCHEDULED, DEPLOYING) may not be on its
	// executor yet.
	state wire.State
}

// planLogs decides a log read from what the state says of it. The state
// keeps the executor of a subtask's current attempt and of the one before
// it, no other: an older attempt's log is not read through the masters,
// which would have to trust some executor's word that it ran it (any
// executor could answer for any attempt, and a job under a reused id would
// be answered with the logs of the job before it).
func planLogs(q logQuery, l logLookup) logPlan {
	cur, prev := l.Current, l.Previous
	switch {
	case !l.job:
		return logPlan{status: http.StatusNotFound, msg: fmt.Sprintf("job %q not found", q.job)}
	case l.Parallelism == 0:
		return logPlan{status: http.StatusNotFound, msg: fmt.Sprintf("job %q has no vertex %q (its vertices: %s)", q.job, q.vertex, strings.Join(l.Vertices, ", "))}
	case q.subtask >= l.Parallelism:
		return logPlan{status: http.StatusNotFound, msg: fmt.Sprintf("vertex %q of job %q has no subtask %d (it has subtasks 0 to %d)", q.vertex, q.job, q.subtask, l.Parallelism-1)}
	case l.HasCurrent && q.attempt == cur.Attempt && cur.Executor == "":
		return logPlan{status: http.StatusConflict, msg: fmt.Sprintf("execution %s has not been placed on an executor yet (it is %s): it has no log until it runs", q.execution, cur.State)}
	case l.HasCurrent && q.attempt == cur.Attempt:
		return logPlan{executor: cur.Executor, state: cur.State}
	case !l.HasCurrent || q.attempt > cur.Attempt:
		return logPlan{status: http.StatusNotFound, msg: fmt.Sprintf("execution %s not found: subtask %s/%d of job %q is at attempt %d", q.execution, q.vertex, q.subtask, q.job, cur.Attempt)}
	case prev.State != "" && q.attempt == prev.Attempt && prev.Executor != "":
		return logPlan{executor: prev.Executor, earlier: true}
	}
	older := fmt.Sprintf("read older ones from the executors: jobmaster job logs %s %s %d --attempt %d", q.job, q.vertex, q.subtask, q.attempt)
	if prev.State != "" && q.attempt == prev.Attempt {
		return logPlan{status: http.StatusNotFound, msg: fmt.Sprintf("execution %s, the attempt before the current one, has no executor in the masters' state: it was replaced before it was placed, or a master of an earlier release recorded it; the masters know only where the attempt before the current one ran, once recorded; %s",
			q.execution, older)}
	}
	before := ""
	if prev.State != "" {
		before = fmt.Sprintf(" (%d)", prev.Attempt)
	}
	return logPlan{status: http.StatusNotFound, msg: fmt.Sprintf("execution %s is neither the current attempt of subtask %s/%d of job %q (%d) nor the one before it%s: the masters know only where the attempt before the current one ran; %s",
		q.execution, q.vertex, q.subtask, q.job, cur.Attempt, before, older)}
}

// logTarget is the executor a log read asks: its id, the HTTP address and
// the status gossip gives it.
type logTarget struct {
	id, addr, status string
}

// targetOf is the executor a plan asks, with its address from gossip
// (members: the executors gossip knows), whatever its status (gossip may be
// wrong about it); false when gossip does not list it, or without an
// address.
func targetOf(p logPlan, members []membership.Member) (logTarget, bool) {
	for _, m := range members {
		if m.ID == p.executor && m.Meta.Role == membership.RoleExecutor && m.Meta.HTTPAddr != "" {
			return logTarget{id: m.ID, addr: m.Meta.HTTPAddr, status: m.Status}, true
		}
	}
	return logTarget{}, false
}

// logAsked is how an executor answered a log read that got no log from
// it: status 0 when it did not answer (err says why), else its status and
// error message; a 200 to a read at once whose length (-1: none) was not
// within the tail asked.
type logAsked struct {
	target logTarget
	status int
	msg    string
	length int64
	err    error
}

// logFailure is the answer of a log read that got no log from the
// executor the state names: asked is how it answered, nil when gossip
// does not know it.
func logFailure(q logQuery, p logPlan, asked *logAsked) (int, string) {
	runs := "runs or ran"
	if p.earlier {
		runs = "ran"
	}
	if asked == nil {
		return http.StatusBadGateway, fmt.Sprintf("executor %s, which %s %s, is not known to this master's gossip: it is gone, and the log with it (or this master has not heard of it yet)", p.executor, runs, q.execution)
	}
	a := *asked
	switch {
	case a.status == 0:
		return http.StatusBadGateway, fmt.Sprintf("executor %s at %s, which %s %s, does not answer (gossip says it is %s): %v; the log is on that executor, unreachable while it is, and gone if it is gone for good",
			a.target.id, a.target.addr, runs, q.execution, a.target.status, a.err)
	case a.status == http.StatusNotFound && (p.state == wire.StateScheduled || p.state == wire.StateDeploying):
		return http.StatusConflict, fmt.Sprintf("execution %s has not started on executor %s yet (it is %s): it has no log until it runs", q.execution, a.target.id, p.state)
	case a.status == http.StatusOK && a.length < 0:
		return http.StatusBadGateway, fmt.Sprintf("executor %s answered the log of %s without a length: a master relays a log read at once only when it can check its end", a.target.id, q.execution)
	case a.status == http.StatusOK:
		return http.StatusBadGateway, fmt.Sprintf("executor %s answered the log of %s with a length of %d bytes, past the %d asked", a.target.id, q.execution, a.length, q.tail)
	case a.status == http.StatusNotFound:
		return http.StatusNotFound, fmt.Sprintf("executor %s no longer has the log of %s: it deletes a task's directory --gc-retention after the task ended (sooner when its disk fills), or it lost its data directory", a.target.id, q.execution)
	}
	return http.StatusBadGateway, fmt.Sprintf("executor %s refused the log of %s: HTTP %d: %s", a.target.id, q.execution, a.status, a.msg)
}

// taskLogs: GET /v1/jobs/{id}/logs. Served by this master, from its own
// state; see the top of this file.
func (m *Master) taskLogs(w http.ResponseWriter, r *http.Request) {
	job, ok := jobID(w, r)
	if !ok {
		return
	}
	q, err := parseLogQuery(job, r.URL.Query())
	if err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	var l logLookup
	m.fsm.Read(func(st *fsm.State) { l = lookupLog(st, q) })
	p := planLogs(q, l)
	if p.status != 0 {
		writeError(w, p.status, p.msg)
		return
	}
	release, status, msg := m.logRelays.take(m.cfg.NodeID, relayCallerOf(callerOf(r), r.RemoteAddr))
	if status != 0 {
		w.Header().Set("Retry-After", "1")
		writeError(w, status, msg)
		return
	}
	defer release()
	t, ok := targetOf(p, m.gossip.Role(membership.RoleExecutor))
	if !ok {
		status, msg = logFailure(q, p, nil)
		writeError(w, status, msg)
		return
	}
	ans, asked := m.askLog(r.Context(), t, q)
	if ans != nil {
		m.relayLog(w, r, t, q, ans, func() bool { return m.stillAllowed(r) })
		return
	}
	if r.Context().Err() != nil {
		return // the caller went
	}
	status, msg = logFailure(q, p, &asked)
	writeError(w, status, msg)
}
