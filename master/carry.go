package master

import (
	"errors"
	"time"

	"jobmaster/leader"
	"jobmaster/wire"
)

// carry carries out a Ready of the core (package leader describes the
// order): it proposes its commands under the session's token, completes it
// with their results, logs, kicks the scheduler, and sends its cancels and
// deployments as how says (sending); a deployment to an
// executor with one in flight waits in the outbox and goes with the next
// request there. It returns the acks for the executor the Ready is about;
// the acks that the answers to its deployments bring are queued for their
// executors' next heartbeats.
func (t *tracker) carry(r leader.Ready, how sending) []string {
	for _, c := range r.Changes {
		args := []any{"executor", c.Executor, "from", c.From, "to", c.To, "silent_for", c.Silent.Round(time.Millisecond)}
		if c.To != leader.Alive {
			args = append(args, "last_heartbeat_error", t.failure(c.Executor))
		}
		t.m.log.Info("executor status", args...)
	}
	if len(r.Propose) > 0 {
		rs, err := t.s.propose(r.Propose...)
		if err != nil {
			t.m.log.Debug("proposal failed", "executor", r.Executor, "commands", len(r.Propose), "err", err)
			r = leader.Failed(r)
		} else {
			r = t.core.Committed(t.read, r, rs)
		}
	}
	deploy, inFlight := t.outbox.Add(r.Deploy)
	r.Tally.Redeployed -= inFlight // still on their way: not sent again
	t.m.metrics.count(r.Tally)
	for _, e := range r.Events {
		t.m.log.Log(t.s.ctx, e.Level, e.Msg, e.Args...)
	}
	if r.Kick {
		t.s.kick()
	}
	var sends []func()
	for _, c := range r.Cancel {
		sends = append(sends, func() { t.sendCancel(c) })
	}
	for _, d := range deploy {
		sends = append(sends, func() { t.deployAll(d) })
	}
	for _, x := range r.Release {
		sends = append(sends, func() { t.sendRelease(x) })
	}
	switch {
	case how == sendNow:
		for _, f := range sends {
			f()
		}
	case how == sendInOrder && len(sends) > 0:
		t.goDo(func() {
			for _, f := range sends {
				f()
			}
		})
	case how == sendEach:
		for _, f := range sends {
			t.goDo(f)
		}
	}
	return r.Ack
}

// sending is how carry sends what a Ready asks of executors.
type sending int

const (
	// sendNow: here and now, one after another (a push's goroutine, or a
	// deploy's answer).
	sendNow sending = iota
	// sendInOrder: one after another, in a goroutine of their own (a
	// heartbeat's answer: its cancels before its deploys, as the report
	// asked, without holding back the next heartbeat).
	sendInOrder
	// sendEach: each in a goroutine of its own.
	sendEach
)

// goDo runs f in a goroutine of the session's.
func (t *tracker) goDo(f func()) {
	t.wg.Add(1)
	go func() {
		defer t.wg.Done()
		f()
	}()
}

// leader is what every request to an executor carries.
func (t *tracker) leader() wire.Leader {
	return wire.Leader{Version: wire.Version, Cluster: t.s.cluster, Token: t.s.token, Node: t.m.cfg.NodeID, Addr: t.m.httpAddr}
}

// heartbeat sends one heartbeat and carries out what its answer asks for.
func (t *tracker) heartbeat(id string) {
	cfg := &t.m.cfg
	h, ok := t.core.Heartbeat(t.read, id, cfg.Now())
	if !ok {
		return
	}
	if h.ProbeStarted {
		t.m.log.Warn("executor silent: heartbeats are probes, which do not renew its lease, until it answers", "executor", id, "silent_for", h.Silent.Round(time.Millisecond))
	}
	req := wire.HeartbeatRequest{Leader: t.leader(), Ack: h.Ack, Probe: h.Probe}
	sent := cfg.Now()
	rep, err := postHeartbeat(t.s.ctx, t.m.client, id, h.Addr, &req, cfg.heartbeatRPCTimeout())
	if t.s.ctx.Err() == nil {
		status, _ := t.core.Status(id)
		t.m.metrics.heartbeat(cfg.Now().Sub(sent), err != nil, status)
	}
	t.noteFailure(id, err)
	if err != nil {
		t.core.HeartbeatFailed(h)
		switch {
		case errors.Is(err, errFencedOff):
			t.m.log.Warn("executor refuses this leader's token", "executor", id, "err", err)
		case errors.Is(err, errMisdirected) && h.ProbeStarted:
			// Once per silence: gossip gives this executor's name an
			// address where another one answers.
			t.m.log.Warn("another executor answers at this executor's address: it is not heard from", "executor", id, "addr", h.Addr, "err", err)
		case errors.Is(err, errAnswerRefused) && h.ProbeStarted:
			t.m.log.Warn("executor's answers are refused: it is not heard from", "executor", id, "err", err)
		}
		return
	}
	// What the answer asks for is sent from goroutines of its own: a
	// deploy or cancel the executor is slow to answer (up to
	// DeployRPCTimeout, as long as its lease) must not hold back the next
	// heartbeat, without which the executor stops its healthy tasks.
	t.core.QueueAcks(id, t.carry(t.core.HeartbeatAnswered(t.read, h, &rep, cfg.Now()), sendInOrder))
}

// noteFailure remembers why the last heartbeat to executor id failed
// (err nil: it was answered), for the line that says it turned suspect
// or lost.
func (t *tracker) noteFailure(id string, err error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if err == nil {
		delete(t.failing, id)
		return
	}
	t.failing[id] = err.Error()
}

// failure says why executor id is not heard from: its last heartbeat's
// error or, when none has failed (an executor turns suspect before a
// heartbeat to it times out), that the last is still unanswered.
func (t *tracker) failure(id string) string {
	t.mu.Lock()
	defer t.mu.Unlock()
	if err, ok := t.failing[id]; ok {
		return err
	}
	return "no heartbeat has failed yet: the last one is still unanswered"
}

// push carries out an executor's push of state changes and returns the acks
// for its answer.
func (t *tracker) push(rep *wire.Report) []string {
	return t.carry(t.core.Partial(t.read, rep.Executor, rep.Executions, rep.Partitions, t.m.cfg.Now()), sendNow)
}

// deployAll sends d; once its answers are in, it hands whatever the outbox
// gathered for d's executor meanwhile to a goroutine of its own (the next
// request does not wait for this one's answer to commit), then carries out
// the answers and queues their acks (leader.Outbox).
func (t *tracker) deployAll(d leader.Deploy) {
	answers, failed := t.sendDeploy(d)
	if n := t.outbox.Failed(d.Executor, failed); n > 0 {
		t.m.metrics.count(leader.Tally{Redeployed: n}) // held back while in flight, sent now
	}
	if next, ok := t.outbox.Sent(d.Executor); ok {
		t.goDo(func() { t.deployAll(next) })
	}
	var acks []string
	for _, a := range answers {
		acks = append(acks, t.carry(t.core.Partial(t.read, d.Executor, a.executions, nil, a.at), sendNow)...)
	}
	t.core.QueueAcks(d.Executor, acks)
}

// deployAnswer is an executor's answer to a deploy and when it came.
type deployAnswer struct {
	executions []wire.ExecutionStatus
	at         time.Time
}

// sendDeploy deploys tasks on an executor and returns its answers, which
// acknowledge them, and the executions whose requests got none.
func (t *tracker) sendDeploy(d leader.Deploy) ([]deployAnswer, []string) {
	addr := t.core.Addr(d.Executor)
	if addr == "" || len(d.Tasks) == 0 {
		return nil, nil
	}
	wt := make([]wire.Task, len(d.Tasks))
	addressed := make(map[*wire.Input][]wire.Input) // the tasks of a vertex share their inputs
	for i, ts := range d.Tasks {
		e := &ts.Execution
		wt[i] = wire.Task{ExecutionID: e.ID, JobID: e.Job, Vertex: e.Vertex, Subtask: e.Subtask,
			Parallelism: ts.Parallelism, Attempt: e.Attempt, Slot: e.Slot, Command: ts.Command, Env: ts.Env,
			Outputs: ts.Outputs, Resources: ts.Resources}
		if len(ts.Inputs) > 0 {
			in, ok := addressed[&ts.Inputs[0]]
			if !ok {
				in = t.addressInputs(ts.Inputs)
				addressed[&ts.Inputs[0]] = in
			}
			wt[i].Inputs = in
		}
	}
	return t.postDeploys(d, addr, wt)
}

// postDeploys sends tasks to an executor in binary, or as JSON to one that
// refused binary earlier in the session: split below what an executor
// reads of a request (thousands of tasks with large commands, envs or
// inputs go as several deploys, each acknowledged by its own answer).
func (t *tracker) postDeploys(d leader.Deploy, addr string, wt []wire.Task) (answers []deployAnswer, failed []string) {
	bin := !t.jsonOnly(d.Executor)
	var reqs []wire.DeployRequest
	if bin {
		reqs = wire.SplitDeployBinary(t.leader(), wt, 0)
	} else {
		reqs = wire.SplitDeploy(t.leader(), wt, 0)
	}
	for i, req := range reqs {
		n := 0
		for _, g := range req.Groups {
			n += len(g.Subtasks) / 3
		}
		var resp wire.DeployResponse
		var err error
		if bin {
			resp, err = postDeploy(t.s.ctx, t.m.client, d.Executor, addr, &req, t.m.cfg.DeployRPCTimeout)
		} else {
			err = postJSON(t.s.ctx, t.m.client, d.Executor, addr, wire.PathDeploy, req, &resp, t.m.cfg.DeployRPCTimeout)
		}
		if errors.Is(err, errNoBinary) {
			// An executor that predates the format: it acted on nothing,
			// and these and the rest go again as JSON.
			t.m.log.Info("executor takes no binary deploy; sending it JSON", "executor", d.Executor)
			t.setJSONOnly(d.Executor)
			var rest []wire.Task
			for _, r := range reqs[i:] {
				ts, _ := r.Tasks() // made by the split: whole triples
				rest = append(rest, ts...)
			}
			more, fail := t.postDeploys(d, addr, rest)
			return append(answers, more...), append(failed, fail...)
		}
		t.m.metrics.deploy(n, err != nil)
		if err != nil {
			t.m.log.Warn("deploy failed; the reconciler retries it", "executor", d.Executor, "tasks", n, "of", len(d.Tasks), "redeploy", d.Redeploy, "err", err)
			ts, _ := req.Tasks() // made by the split: whole triples
			for _, x := range ts {
				failed = append(failed, x.ExecutionID)
			}
			continue
		}
		answers = append(answers, deployAnswer{executions: resp.Executions, at: t.m.cfg.Now()})
	}
	return answers, failed
}

// jsonOnly reports whether the executor refused a deploy in binary during
// this session.
func (t *tracker) jsonOnly(executor string) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.noBinary[executor]
}

func (t *tracker) setJSONOnly(executor string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.noBinary == nil {
		t.noBinary = make(map[string]bool)
	}
	t.noBinary[executor] = true
}

// addressInputs fills in the HTTP address of each source's executor, from
// the executor table: the consumer's executor fetches from there. A source
// whose executor the table does not know keeps an empty address, and its
// fetch fails as unavailable.
func (t *tracker) addressInputs(inputs []wire.Input) []wire.Input {
	out := make([]wire.Input, len(inputs))
	for i, in := range inputs {
		in.Sources = append([]wire.Source(nil), in.Sources...)
		for k := range in.Sources {
			in.Sources[k].Addr = t.core.Addr(in.Sources[k].Executor)
		}
		out[i] = in
	}
	return out
}

// sendRelease asks an executor to delete partitions nobody needs.
func (t *tracker) sendRelease(x leader.Release) {
	addr := t.core.Addr(x.Executor)
	if addr == "" {
		return
	}
	t.postIDs(x.Executor, addr, wire.PathRelease, x.IDs, func(ids []string) any { return wire.ReleaseRequest{Leader: t.leader(), IDs: ids} },
		"release failed; the next report repeats it")
}

// postIDs sends a request of ids (a cancel or a release) to executor at
// addr, in requests an executor reads whole (chunkIDs); the first that
// fails is logged at debug with failed and ends it (the caller's
// reconciliation repeats what is left).
func (t *tracker) postIDs(executor, addr, path string, ids []string, req func([]string) any, failed string) {
	for _, chunk := range chunkIDs(ids, idsPerRequestBytes) {
		if err := postJSON(t.s.ctx, t.m.client, executor, addr, path, req(chunk), nil, t.m.cfg.CancelRPCTimeout); err != nil {
			t.m.log.Debug(failed, "executor", executor, "err", err)
			return
		}
	}
}

// idsPerRequestBytes bounds the ids of one cancel or release, as JSON,
// well below what an executor reads of a request (1 MiB).
const idsPerRequestBytes = 768 << 10

// chunkIDs splits ids into runs of at most max bytes as a JSON list (an
// id counted as if each of its bytes were escaped when it holds any byte
// JSON escapes). One id longer than max goes alone.
func chunkIDs(ids []string, max int) [][]string {
	var out [][]string
	start, size := 0, 0
	for i, id := range ids {
		n := len(id) + 3 // quotes and comma
		for k := 0; k < len(id); k++ {
			if c := id[k]; c < 0x20 || c == '"' || c == '\\' || c >= 0x80 || c == '<' || c == '>' || c == '&' {
				n = 6*len(id) + 3
				break
			}
		}
		if size+n > max && i > start {
			out = append(out, ids[start:i])
			start, size = i, 0
		}
		size += n
	}
	if start < len(ids) {
		out = append(out, ids[start:])
	}
	return out
}

// sendCancel asks an executor to stop executions.
func (t *tracker) sendCancel(c leader.Cancel) {
	addr := t.core.Addr(c.Executor)
	if addr == "" {
		return
	}
	t.postIDs(c.Executor, addr, wire.PathCancel, c.IDs, func(ids []string) any { return wire.CancelRequest{Leader: t.leader(), IDs: ids} },
		"cancel failed; the reconciler retries it")
}
