package macro

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"maps"
	"net/http"
	"time"

	"jobmaster/bench/cluster"
	"jobmaster/bench/results"
	"jobmaster/transport"
)

// Failover kills the leader with SIGKILL, trial after trial, and measures
// from the signal to
//   - a new leader with a token: the first moment a surviving master's own
//     state (GET /v1/cluster?stale, polled every 5 ms on both survivors)
//     names another leader and a fencing token newer than the old one,
//     i.e. the new leader has committed establish-leadership;
//   - the first accepted write: one writer per survivor sends PUT
//     /v1/jobs/{new id} right after the signal, and again after any
//     failure, until one gets its 201; the time is that answer's arrival.
//
// Between trials the killed master is restarted on its data directory and
// the next trial waits until all three masters agree on the leader and its
// token, then one more second.
func Failover(ctx context.Context, e *Env) error {
	trials := 20
	if e.Quick {
		trials = 5
	}
	c, err := e.StartSecurable(ctx, "failover")
	if err != nil {
		return err
	}
	defer c.Close()
	hc := c.NewHTTPClient(transport.ClientOptions{MaxIdleConnsPerHost: 4, IdleConnTimeout: time.Minute})
	defer hc.CloseIdleConnections()
	var toToken, toWrite, rejoin []time.Duration
	var trialsPhases []phases
	for trial := 0; trial < trials; trial++ {
		sctx, cancel := context.WithTimeout(ctx, time.Minute)
		l, err := c.WaitLeader(sctx)
		cancel()
		if err != nil {
			return fmt.Errorf("trial %d: %w", trial, err)
		}
		if err := sleep(ctx, time.Second); err != nil {
			return err
		}
		survivors := c.Followers(l)
		// Warm a connection to each survivor, as a client in use would have.
		for _, s := range survivors {
			_ = put(ctx, hc, s, fmt.Sprintf("fo-warm-%d-%s", trial, s.ID))
		}
		tctx, tcancel := context.WithTimeout(ctx, 30*time.Second)
		start := make(chan struct{})
		wrote := make(chan time.Time, len(survivors))
		token := make(chan time.Time, len(survivors))
		for i, s := range survivors {
			go func() {
				<-start
				for seq := 0; tctx.Err() == nil; seq++ {
					if put(tctx, hc, s, fmt.Sprintf("fo-%d-%d-%d", trial, i, seq)) == nil {
						wrote <- time.Now()
						return
					}
					time.Sleep(5 * time.Millisecond)
				}
			}()
			go func() {
				<-start
				for tctx.Err() == nil {
					v, err := c.View(tctx, s)
					if err == nil && v.Leader != nil && *v.Leader != l.Node.ID && v.FencingToken > l.Token {
						token <- time.Now()
						return
					}
					time.Sleep(5 * time.Millisecond)
				}
			}()
		}
		killed := l.Node
		t0 := killed.KillThen(func() { close(start) })
		var tw, tt time.Time
		for tw.IsZero() || tt.IsZero() {
			select {
			case t := <-wrote:
				if tw.IsZero() {
					tw = t
				}
			case t := <-token:
				if tt.IsZero() {
					tt = t
				}
			case <-tctx.Done():
				tcancel()
				return fmt.Errorf("trial %d: no new leader or no accepted write within 30s", trial)
			}
		}
		tcancel()
		toToken = append(toToken, tt.Sub(t0))
		toWrite = append(toWrite, tw.Sub(t0))
		ph := trialPhases(survivors, t0, tw)
		trialsPhases = append(trialsPhases, ph)
		r0 := time.Now()
		if err := c.Restart(killed); err != nil {
			return err
		}
		rctx, rcancel := context.WithTimeout(ctx, time.Minute)
		_, err = c.WaitLeader(rctx)
		rcancel()
		if err != nil {
			return fmt.Errorf("trial %d: after restarting %s: %w", trial, killed.ID, err)
		}
		rejoin = append(rejoin, time.Since(r0))
		e.Log("failover trial %d: killed %s (token %d): new leader with token after %s, write accepted after %s (detect %s, elect %s, barrier %s, epoch %s, write %s)",
			trial+1, killed.ID, l.Token, toToken[trial].Round(time.Millisecond), toWrite[trial].Round(time.Millisecond),
			ph.detect.Round(time.Millisecond), ph.elect.Round(time.Millisecond), ph.barrier.Round(time.Millisecond), ph.epoch.Round(time.Millisecond), ph.write.Round(time.Millisecond))
	}
	note := "3 masters, default Raft timeouts (250 ms), no other load"
	if e.TLS {
		note += "; TLS, gossip encryption"
	}
	ts, ws := results.Seconds(toToken), results.Seconds(toWrite)
	e.Run.Add(results.Figure{Group: e.group("failover"), Name: "kill -9 leader to new leader with token (p50)", Value: results.Percentile(ts, 50), Unit: "s",
		Extra:   map[string]float64{"p99_s": results.Percentile(ts, 99), "min_s": results.Percentile(ts, 0), "trials": float64(len(ts))},
		Command: e.command("failover"), Note: note})
	wextra := map[string]float64{"min_s": results.Percentile(ws, 0), "trials": float64(len(ws))}
	maps.Copy(wextra, phaseFigures(trialsPhases))
	e.Run.Add(results.Figure{Group: e.group("failover"), Name: "kill -9 leader to first accepted write (p50)", Value: results.Percentile(ws, 50), Unit: "s",
		Extra:   wextra,
		Command: e.command("failover"), Note: note}).AtMost(0.45, "p50 <= 0.45 s")
	e.Run.Add(results.Figure{Group: e.group("failover"), Name: "kill -9 leader to first accepted write (p99)", Value: results.Percentile(ws, 99), Unit: "s",
		Extra:   map[string]float64{"max_s": results.Percentile(ws, 100), "trials": float64(len(ws))},
		Command: e.command("failover"), Note: note}).AtMost(0.7, "p99 <= 0.7 s")
	if !e.TLS {
		c.Close() // the anchor runs on a quiet machine too
		anchorFailover(ctx, e, trials, ws)
	}
	rs := results.Seconds(rejoin)
	e.Run.Add(results.Figure{Group: e.group("failover"), Name: "restarted master back in agreement (p50)", Value: results.Percentile(rs, 50), Unit: "s",
		Extra: map[string]float64{"p99_s": results.Percentile(rs, 99)}, Command: e.command("failover"),
		Note: "process start to all three masters agreeing on leader and token"})
	return nil
}

// attemptTimeout bounds one write of a failover trial, jobmaster's and
// etcd's alike: a write held by a member whose leader died is given up and
// sent again, as a client would (etcd holds one until its own request
// timeout, 7 s; a master until a new leader is known, then forwards it).
// It is also the resolution of a trial whose writes are held to their
// timeout.
const attemptTimeout = 250 * time.Millisecond

// put submits a one-subtask job to one master and succeeds on 200 or 201.
func put(ctx context.Context, hc *http.Client, n *cluster.Node, id string) error {
	ctx, cancel := context.WithTimeout(ctx, attemptTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPut, transport.URL(hc, n.HTTPAddr, "/v1/jobs/"+id), bytes.NewReader([]byte(submitSpec)))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := hc.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, resp.Body)
	if resp.StatusCode != http.StatusCreated && resp.StatusCode != http.StatusOK {
		return fmt.Errorf("PUT %s: %s", id, resp.Status)
	}
	return nil
}
