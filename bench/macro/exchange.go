package macro

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"jobmaster/api"
	"jobmaster/bench/cluster"
	"jobmaster/bench/results"
	"jobmaster/client"
)

// Exchange measures data moving between tasks through result partitions on
// two exec executors:
//
//   - blocking: 4 producers write 64 MiB for each of 4 consumers (1 GiB in
//     all), the consumers read everything; MB/s from the first producer's
//     start to the last consumer's end. The same run writes and then reads
//     the same bytes through local files on this disk, with no exchange:
//     the baseline the target is a ratio of;
//   - pipelined: the same shape with a quarter of the bytes, read while the
//     producers write;
//   - each executor's peak resident memory over both (its VmHWM);
//   - recovery: a producer's executor killed once it FINISHED while its
//     consumer waits: from the kill to the re-run producer FINISHED (the
//     executor timeout, 15 s by default, is most of it).
func Exchange(ctx context.Context, e *Env) error {
	const producers, consumers = 4, 4
	per := int64(64 << 20) // bytes per producer and consumer
	if e.Quick {
		per = 8 << 20
	}
	total := per * producers * consumers
	c, err := e.StartCluster(ctx, "exchange")
	if err != nil {
		return err
	}
	defer c.Close()
	var exs []*cluster.Node
	for i := 0; i < 2; i++ {
		n, err := c.AddExecutor(fmt.Sprintf("x%d", i+1), 4, "exec")
		if err != nil {
			return err
		}
		exs = append(exs, n)
	}
	wctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	if err := c.WaitExecutors(wctx, 2); err != nil {
		return err
	}
	if _, err := c.WaitLeader(wctx); err != nil {
		return err
	}
	clients, hc, err := Clients(c, 2)
	if err != nil {
		return err
	}
	defer hc.CloseIdleConnections()
	cl := clients[0]

	baseline, err := localDiskBaseline(filepath.Join(e.Dir, "exchange-baseline"), producers, consumers, per)
	if err != nil {
		return err
	}
	mb := float64(total) / 1e6
	e.Run.Add(results.Figure{Group: "exchange", Name: fmt.Sprintf("local files, %d MB written then read (baseline)", int(mb)),
		Value: mb / baseline.Seconds(), Unit: "MB/s", Command: Command("exchange"), Note: "this run; no exchange: the bytes the blocking exchange moves, through files on the same disk"})

	blocking, err := runExchange(ctx, cl, "xchg-blocking", "blocking", producers, consumers, per)
	if err != nil {
		return err
	}
	ratio := baseline.Seconds() / blocking.Seconds()
	e.Run.Add(results.Figure{Group: "exchange", Name: fmt.Sprintf("blocking all-to-all, %d MB from %d producers to %d consumers on 2 executors", int(mb), producers, consumers),
		Value: mb / blocking.Seconds(), Unit: "MB/s", Extra: map[string]float64{"seconds": blocking.Seconds(), "ratio_to_local_files": ratio},
		Command: Command("exchange"), Note: "first producer start to last consumer end"}).AtLeast(0.5*mb/baseline.Seconds(), ">= 0.5 x the local-file baseline")
	e.Log("exchange: blocking %.0f MB/s, local files %.0f MB/s (ratio %.2f)", mb/blocking.Seconds(), mb/baseline.Seconds(), ratio)

	pper := per / 4
	pipelined, err := runExchange(ctx, cl, "xchg-pipelined", "pipelined", producers, consumers, pper)
	if err != nil {
		return err
	}
	pmb := float64(pper*producers*consumers) / 1e6
	e.Run.Add(results.Figure{Group: "exchange", Name: fmt.Sprintf("pipelined all-to-all, %d MB through named pipes", int(pmb)),
		Value: pmb / pipelined.Seconds(), Unit: "MB/s", Extra: map[string]float64{"seconds": pipelined.Seconds()},
		Command: Command("exchange"), Note: "this run; producers and consumers run together, the consumers read the pipes one after another"})
	e.Log("exchange: pipelined %.0f MB/s", pmb/pipelined.Seconds())

	for _, x := range exs {
		hwm, err := peakRSS(x.Pid())
		if err != nil {
			return err
		}
		e.Run.Add(results.Figure{Group: "exchange", Name: "peak RSS of executor " + x.ID + " over both exchanges",
			Value: float64(hwm) / (1 << 20), Unit: "MiB", Command: Command("exchange"),
			Note: "VmHWM: partitions stream through the executor, never held whole"}).AtMost(100, "<= 100 MiB")
	}

	rec, err := recovery(ctx, c, cl, exs)
	if err != nil {
		return err
	}
	e.Run.Add(results.Figure{Group: "exchange", Name: "partition loss: executor kill to the producer re-run FINISHED",
		Value: rec.Seconds(), Unit: "s", Command: Command("exchange"),
		Note: "this run; default timings: the executor timeout (15 s) is most of it"})
	e.Log("exchange: partition loss recovered in %s", rec.Round(time.Millisecond))
	return nil
}

// exchangeSpec: producers write per bytes for each consumer (all-to-all);
// consumers read every input and print how many bytes they read.
func exchangeSpec(name, mode string, producers, consumers int, per int64) []byte {
	gen := fmt.Sprintf(`for j in $(seq 0 %d); do head -c %d /dev/zero > "$JOBMASTER_OUTPUT_DIR/sink/$j"; done`, consumers-1, per)
	sink := `n=0; for f in "$JOBMASTER_INPUT_DIR"/gen/*; do m=$(wc -c < "$f"); n=$((n+m)); done; echo $n`
	return []byte(fmt.Sprintf(`{"name":%q,"vertices":[{"id":"gen","parallelism":%d,"command":["sh","-c",%q]},
		{"id":"sink","parallelism":%d,"command":["sh","-c",%q],"inputs":[{"from":"gen","mode":%q}]}],"restart":{"strategy":"none"}}`,
		name, producers, gen, consumers, sink, mode))
}

// runExchange runs one exchange job to FINISHED, checks every consumer read
// every byte, and returns the time from the first producer's start to the
// last consumer's end, as the leader recorded them.
func runExchange(ctx context.Context, cl *client.Client, id, mode string, producers, consumers int, per int64) (time.Duration, error) {
	if _, err := cl.SubmitJob(ctx, id, exchangeSpec(id, mode, producers, consumers, per)); err != nil {
		return 0, err
	}
	j, err := waitJob(ctx, cl, id, 10*time.Minute)
	if err != nil {
		return 0, err
	}
	if j.Status != "FINISHED" {
		return 0, fmt.Errorf("exchange %s ended %s: %s", id, j.Status, j.Message)
	}
	for i := 0; i < consumers; i++ {
		out, err := logs(ctx, cl, id, "sink", i)
		if err != nil {
			return 0, err
		}
		if want := strconv.FormatInt(per*int64(producers), 10); out != want {
			return 0, fmt.Errorf("exchange %s: sink/%d read %q bytes, want %s", id, i, out, want)
		}
	}
	var first, last int64
	for _, v := range j.Vertices {
		for _, s := range v.Subtasks {
			if v.ID == "gen" && (first == 0 || s.StartTime < first) {
				first = s.StartTime
			}
			if v.ID == "sink" && s.EndTime > last {
				last = s.EndTime
			}
		}
	}
	if first == 0 || last < first {
		return 0, fmt.Errorf("exchange %s: no start or end times recorded", id)
	}
	return time.Duration(last-first) * time.Millisecond, nil
}

func waitJob(ctx context.Context, cl *client.Client, id string, timeout time.Duration) (*api.Job, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var j *api.Job
	err := waitUntil(ctx, "job "+id+" to end", 50*time.Millisecond, func() (bool, error) {
		var err error
		if j, err = cl.Job(ctx, id); err != nil {
			return false, nil
		}
		return j.Status == "FINISHED" || j.Status == "FAILED" || j.Status == "CANCELED", nil
	})
	return j, err
}

func logs(ctx context.Context, cl *client.Client, job, vertex string, subtask int) (string, error) {
	rc, err := cl.Logs(ctx, job, vertex, subtask, client.Stdout)
	if err != nil {
		return "", err
	}
	defer rc.Close()
	b, err := io.ReadAll(rc)
	return strings.TrimSpace(string(b)), err
}

// localDiskBaseline writes what each producer writes for each consumer to
// its own file under dir, then reads every file back, and returns the time
// both took: what the exchange moves, without the exchange.
func localDiskBaseline(dir string, producers, consumers int, per int64) (time.Duration, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return 0, err
	}
	defer os.RemoveAll(dir)
	buf := make([]byte, 1<<20)
	start := time.Now()
	for p := 0; p < producers; p++ {
		for c := 0; c < consumers; c++ {
			f, err := os.Create(filepath.Join(dir, fmt.Sprintf("%d-%d", p, c)))
			if err != nil {
				return 0, err
			}
			w := bufio.NewWriterSize(f, len(buf))
			for n := int64(0); n < per; n += int64(len(buf)) {
				if _, err := w.Write(buf[:min(int64(len(buf)), per-n)]); err != nil {
					f.Close()
					return 0, err
				}
			}
			if err := w.Flush(); err != nil {
				f.Close()
				return 0, err
			}
			if err := f.Close(); err != nil {
				return 0, err
			}
		}
	}
	for p := 0; p < producers; p++ {
		for c := 0; c < consumers; c++ {
			f, err := os.Open(filepath.Join(dir, fmt.Sprintf("%d-%d", p, c)))
			if err != nil {
				return 0, err
			}
			_, err = io.CopyBuffer(io.Discard, f, buf)
			f.Close()
			if err != nil {
				return 0, err
			}
		}
	}
	return time.Since(start), nil
}

// peakRSS reads a process's peak resident memory (VmHWM) in bytes.
func peakRSS(pid int) (int64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")), 10, 64)
			return kb << 10, err
		}
	}
	return 0, fmt.Errorf("no VmHWM for pid %d", pid)
}

// recovery kills the executor that holds gen/0's partition while sum
// waits for a gate file, and measures from the kill to the re-run gen/0
// FINISHED (as the leader recorded it). The killed executor is restarted
// afterwards.
func recovery(ctx context.Context, c *cluster.Cluster, cl *client.Client, exs []*cluster.Node) (time.Duration, error) {
	gate := filepath.Join(os.TempDir(), fmt.Sprintf("jmbench-gate-%d", os.Getpid()))
	defer os.Remove(gate)
	sum := fmt.Sprintf(`if [ "$JOBMASTER_ATTEMPT" = 0 ]; then while [ ! -e %q ]; do sleep 0.05; done; fi; cat "$JOBMASTER_INPUT_DIR"/gen/* | wc -c`, gate)
	spec := fmt.Sprintf(`{"name":"xchg-loss","vertices":[{"id":"gen","parallelism":2,"command":["sh","-c","head -c 1000 /dev/zero > \"$JOBMASTER_OUTPUT_DIR/sum/0\""]},
		{"id":"sum","parallelism":1,"command":["sh","-c",%q],"inputs":[{"from":"gen","mode":"blocking"}]}],
		"restart":{"strategy":"fixed-delay","attempts":3,"delay":"0s"}}`, sum)
	const id = "xchg-loss"
	if _, err := cl.SubmitJob(ctx, id, []byte(spec)); err != nil {
		return 0, err
	}
	var host string
	wctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	err := waitUntil(wctx, "gen to finish", 50*time.Millisecond, func() (bool, error) {
		j, err := cl.Job(wctx, id)
		if err != nil {
			return false, nil
		}
		for _, s := range j.Vertices[0].Subtasks {
			if s.State != "FINISHED" {
				return false, nil
			}
		}
		host = j.Vertices[0].Subtasks[0].Executor
		return true, nil
	})
	if err != nil {
		return 0, err
	}
	var victim *cluster.Node
	for _, x := range exs {
		if x.ID == host {
			victim = x
		}
	}
	if victim == nil {
		return 0, fmt.Errorf("recovery: gen/0 ran on %q, not one of the benchmark's executors", host)
	}
	killed := victim.Kill()
	var reran int64
	err = waitUntil(wctx, "gen/0 to run again", 50*time.Millisecond, func() (bool, error) {
		j, err := cl.Job(wctx, id)
		if err != nil {
			return false, nil
		}
		if s := j.Vertices[0].Subtasks[0]; s.Attempt > 0 && s.State == "FINISHED" {
			reran = s.EndTime
			return true, nil
		}
		return false, nil
	})
	if err != nil {
		return 0, err
	}
	if err := os.WriteFile(gate, nil, 0o644); err != nil {
		return 0, err
	}
	if j, err := waitJob(ctx, cl, id, time.Minute); err != nil || j.Status != "FINISHED" {
		return 0, fmt.Errorf("recovery: the job did not finish after the re-run: %v", err)
	}
	if err := c.Restart(victim); err != nil {
		return 0, err
	}
	return time.UnixMilli(reran).Sub(killed), nil
}
