package macro

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"jobmaster/bench/cluster"
	"jobmaster/fsm"
	"jobmaster/transport"
	"jobmaster/wire"
)

// snapshot reads a master's replicated state without forwarding (GET
// /v1/operator/snapshot?stale) and restores it here. at is when the answer
// began to arrive: the master captured the state just before. Reading a
// follower's state keeps the poll off the leader; the follower lags the
// leader by one commit round.
func snapshot(ctx context.Context, n *cluster.Node) (st *fsm.State, at time.Time, err error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, transport.URL(cluster.HTTP, n.HTTPAddr, "/v1/operator/snapshot?stale"), nil)
	if err != nil {
		return nil, time.Time{}, err
	}
	resp, err := cluster.HTTP.Do(req)
	if err != nil {
		return nil, time.Time{}, err
	}
	at = time.Now()
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, at, fmt.Errorf("snapshot of %s: %s", n.ID, resp.Status)
	}
	st, err = fsm.Restore(resp.Body)
	return st, at, err
}

// progress counts the current attempts of the given jobs' subtasks.
type progress struct {
	total, placed, running, finished, terminal int
	// lastDeploy, lastStart and lastEnd are the latest placement, RUNNING
	// and end times (unix ms, the leader's clock) over those executions;
	// unstarted counts executions that started without a recorded start
	// (they ended before RUNNING was recorded).
	lastDeploy, lastStart, lastEnd int64
	unstarted                      int
}

func countJobs(st *fsm.State, jobs []string) progress {
	var p progress
	for _, id := range jobs {
		v, ok := st.Job(id)
		if !ok {
			continue
		}
		for _, vx := range v.Vertices {
			p.total += vx.Parallelism
			for _, e := range vx.Subtasks {
				if e.State != wire.StateScheduled {
					p.placed++
					p.lastDeploy = max(p.lastDeploy, e.DeployTime)
				}
				switch {
				case e.State == wire.StateRunning:
					p.running++
				case e.State == wire.StateFinished:
					p.finished++
				}
				if e.StartTime != 0 {
					p.lastStart = max(p.lastStart, e.StartTime)
				} else if e.State == wire.StateFinished {
					p.unstarted++
				}
				if e.State.Terminal() {
					p.terminal++
					p.lastEnd = max(p.lastEnd, e.EndTime)
				}
			}
		}
	}
	return p
}

// runningGauge is the line of a master's metrics that counts the RUNNING
// executions in its replicated state.
const runningGauge = `jobmaster_executions{state="RUNNING"} `

// runningExecutions reads how many executions a master's state holds
// RUNNING from its metrics (GET /v1/metrics, answered from its own state):
// a few kilobytes, where a snapshot of a state with 10,000 executions is a
// megabyte for the master to write and for this process to restore.
func runningExecutions(ctx context.Context, n *cluster.Node) (int, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, transport.URL(cluster.HTTP, n.HTTPAddr, "/v1/metrics"), nil)
	if err != nil {
		return 0, err
	}
	resp, err := cluster.HTTP.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return 0, fmt.Errorf("metrics of %s: %s", n.ID, resp.Status)
	}
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), runningGauge); ok {
			f, err := strconv.ParseFloat(v, 64)
			return int(f), err
		}
	}
	if err := sc.Err(); err != nil {
		return 0, err
	}
	return 0, fmt.Errorf("metrics of %s: no %s", n.ID, strings.TrimSpace(runningGauge))
}
