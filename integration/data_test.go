package integration

import (
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"jobmaster/api"
	"jobmaster/client"
	"jobmaster/wire"
)

// Data exchange between tasks on real executors (docs/architecture.md,
// "Result partitions"): every executor has its own data directory, so the
// bytes cross executors.

// genSum is gen (3 subtasks: 1..100, 101..200, 201..300) hashing each
// number to one of the sum subtasks (n mod 2) over a blocking all-to-all
// edge; each sum subtask prints the sum of what it read. sumExtra runs
// first in sum's command (heldSum holds sum back with it).
func genSum(t *testing.T, name string, sumExtra string) string {
	return jobSpec(t, name, genSumRestart, genSumVertices(sumExtra)...)
}

var genSumRestart = map[string]any{"strategy": "fixed-delay", "attempts": 3, "delay": "200ms"}

func genSumVertices(sumExtra string) []vertex {
	gen := `seq $((JOBMASTER_SUBTASK*100+1)) $((JOBMASTER_SUBTASK*100+100)) | awk -v out="$JOBMASTER_OUTPUT_DIR/sum" '{ print > (out "/" ($1 % 2)) }'`
	sum := sumExtra + `cat "$JOBMASTER_INPUT_DIR"/gen/* | awk '{ s += $1 } END { print s+0 }'`
	return []vertex{
		{ID: "gen", Parallelism: 3, Command: []string{"sh", "-c", gen}},
		{ID: "sum", Parallelism: 2, Command: []string{"sh", "-c", sum}, Inputs: []map[string]any{{"from": "gen", "mode": "blocking"}}},
	}
}

// awaitFile is a shell loop that waits (at most a minute) until the file
// gate exists.
func awaitFile(gate string) string {
	return fmt.Sprintf(`n=0; while [ ! -e %q ]; do n=$((n+1)); [ $n -gt 600 ] && exit 1; sleep 0.1; done; `, gate)
}

// heldSum is genSum with sum's first attempt started, its inputs fetched,
// and held back until the file gate exists before it adds them up.
func heldSum(t *testing.T, name, gate string) string {
	return genSum(t, name, `if [ "$JOBMASTER_ATTEMPT" = 0 ]; then `+awaitFile(gate)+`fi; `)
}

// runHeldSum submits heldSum as job name once every executor is alive,
// waits until both sum subtasks run (they have fetched gen's output), and
// returns the gate that lets them finish and the job as it was then.
func (c *Cluster) runHeldSum(t *testing.T, name string) (string, *api.Job) {
	t.Helper()
	c.WaitExecutorsAlive()
	gate := filepath.Join(t.TempDir(), "go")
	c.Submit(name, heldSum(t, name, gate))
	var j *api.Job
	WaitFor(t, "sum to run", 60*time.Second, func() bool {
		j = c.Job(name)
		st := subtasks(j)
		return st["sum/0"].State == wire.StateRunning && st["sum/1"].State == wire.StateRunning
	})
	return gate, j
}

// waitingSum is genSum with sum not started until the file gate exists:
// sum also reads hold, a vertex that waits for the gate (and writes
// nothing), so gen's output is needed and not yet read until then.
func waitingSum(t *testing.T, name, gate string, restart map[string]any) string {
	vs := genSumVertices("")
	hold := vertex{ID: "hold", Parallelism: 1, Command: []string{"sh", "-c", awaitFile(gate)}}
	vs[1].Inputs = append(vs[1].Inputs, map[string]any{"from": "hold", "mode": "blocking"})
	return jobSpec(t, name, restart, vs[0], hold, vs[1])
}

// stdout reads a subtask's output.
func (c *Cluster) stdout(t *testing.T, job, vertex string, subtask int) string {
	t.Helper()
	rc, err := c.Client.Logs(c.ctx(), job, vertex, subtask, client.Stdout)
	require.NoError(t, err, "logs of %s %s/%d", job, vertex, subtask)
	defer rc.Close()
	b, err := io.ReadAll(rc)
	require.NoError(t, err)
	return strings.TrimSpace(string(b))
}

// sumOf adds the numbers the sum subtasks printed.
func (c *Cluster) sumOf(t *testing.T, job string) int {
	total := 0
	for i := 0; i < 2; i++ {
		n, err := strconv.Atoi(c.stdout(t, job, "sum", i))
		require.NoError(t, err, "sum/%d's output", i)
		total += n
	}
	return total
}

const wantSum = 300 * 301 / 2

// waitNoBytes waits until no executor holds anything of the job: no
// partition reported, and no file of it left under a partitions or input
// directory of any executor's data directory.
func (c *Cluster) waitNoBytes(t *testing.T, job string) {
	t.Helper()
	WaitFor(t, "no executor to hold bytes of "+job, 20*time.Second, func() bool {
		for _, e := range c.Executors {
			if !e.Running() {
				continue
			}
			var ps wire.Partitions
			if err := c.getJSON(c.URL(e.HTTPAddr, wire.PathPartitions), &ps); err != nil {
				return false
			}
			for _, p := range ps.Partitions {
				if p.JobID == job {
					return false
				}
			}
		}
		return len(c.bytesOnDisk(job)) == 0
	})
}

// bytesOnDisk lists the regular files of job's data under the executors'
// data directories, outside the execution logs.
func (c *Cluster) bytesOnDisk(job string) []string {
	var out []string
	for _, e := range c.Executors {
		_ = filepath.WalkDir(e.DataDir, func(path string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() || !d.Type().IsRegular() {
				return nil
			}
			rel, _ := filepath.Rel(e.DataDir, path)
			parts := strings.Split(filepath.ToSlash(rel), "/")
			data := false
			for _, p := range parts {
				data = data || p == "partitions" || p == "input" || p == "output" || p == "spool"
			}
			if data && strings.Contains(rel, job) {
				out = append(out, path)
			}
			return nil
		})
	}
	return out
}

func TestDataExchange(t *testing.T) {
	skipShort(t)
	hs := t.TempDir()
	c := NewCluster(t, Options{Executors: 3, Slots: 2, Env: []string{"HANDSHAKE=" + hs}})
	c.WaitExecutorsAlive()

	t.Run("blocking all-to-all across executors", func(t *testing.T) {
		c.Submit("sums", genSum(t, "sums", ""))
		j := c.WaitJob("sums", 60*time.Second, "FINISHED")
		execs := map[string]bool{}
		for _, s := range j.Vertices[0].Subtasks {
			execs[s.Executor] = true
		}
		require.Greater(t, len(execs), 1, "gen ran on one executor only: the test proves nothing")
		require.Equal(t, wantSum, c.sumOf(t, "sums"))
		c.waitNoBytes(t, "sums")
	})

	t.Run("forward", func(t *testing.T) {
		gen := `echo "from $JOBMASTER_SUBTASK" > "$JOBMASTER_OUTPUT_DIR/fwd/$JOBMASTER_SUBTASK"; echo "not for me" > "$JOBMASTER_OUTPUT_DIR/fwd/$(( (JOBMASTER_SUBTASK+1) % 3 ))"; echo junk > "$JOBMASTER_OUTPUT_DIR/fwd/x"`
		fwd := `echo "$(ls "$JOBMASTER_INPUT_DIR/gen" | tr '\n' ' ')| $(cat "$JOBMASTER_INPUT_DIR"/gen/*)"`
		c.Submit("fwd", jobSpec(t, "fwd", nil,
			vertex{ID: "gen", Parallelism: 3, Command: []string{"sh", "-c", gen}},
			vertex{ID: "fwd", Parallelism: 3, Command: []string{"sh", "-c", fwd},
				Inputs: []map[string]any{{"from": "gen", "mode": "blocking", "distribution": "forward"}}}))
		c.WaitJob("fwd", 60*time.Second, "FINISHED")
		for i := 0; i < 3; i++ {
			require.Equal(t, fmt.Sprintf("%d | from %d", i, i), c.stdout(t, "fwd", "fwd", i))
		}
		c.waitNoBytes(t, "fwd")
	})

	t.Run("pipelined streams while the producer runs", func(t *testing.T) {
		// prod writes a first line, then waits until cons has read it (cons
		// touches a file), then writes the rest: cons can only get there if
		// the bytes stream before prod ends. Both read pipes in order.
		prod := `d="$HANDSHAKE/$JOBMASTER_JOB_ID"; mkdir -p "$d"; echo first > "$JOBMASTER_OUTPUT_DIR/cons/0"; n=0; while [ ! -e "$d/seen" ]; do n=$((n+1)); [ $n -gt 600 ] && exit 1; sleep 0.1; done; head -c 3000000 /dev/zero | tr '\0' 'x' >> "$JOBMASTER_OUTPUT_DIR/cons/0"; echo >> "$JOBMASTER_OUTPUT_DIR/cons/0"; echo last >> "$JOBMASTER_OUTPUT_DIR/cons/0"`
		other := `head -c 2000000 /dev/zero | tr '\0' 'y' > "$JOBMASTER_OUTPUT_DIR/cons/0"`
		cons := `d="$HANDSHAKE/$JOBMASTER_JOB_ID"; exec 3< "$JOBMASTER_INPUT_DIR/prod/0"; read -r a <&3; touch "$d/seen"; b=$(cat <&3 | wc -c); o=$(cat "$JOBMASTER_INPUT_DIR/other/0" | wc -c); echo "$a $b $o"`
		c.Submit("pipe", jobSpec(t, "pipe", nil,
			vertex{ID: "prod", Parallelism: 1, Command: []string{"sh", "-c", prod}},
			vertex{ID: "other", Parallelism: 1, Command: []string{"sh", "-c", other}},
			vertex{ID: "cons", Parallelism: 1, Command: []string{"sh", "-c", cons},
				Inputs: []map[string]any{{"from": "prod", "mode": "pipelined"}, {"from": "other", "mode": "pipelined"}}}))
		c.WaitJob("pipe", 60*time.Second, "FINISHED")
		// 3,000,000 x, a newline, "last" and a newline after the first line.
		require.Equal(t, "first 3000006 2000000", c.stdout(t, "pipe", "cons", 0))
		c.waitNoBytes(t, "pipe")
	})

	t.Run("release on cancel and failure", func(t *testing.T) {
		c.Submit("gone", genSum(t, "gone", `sleep 300; `))
		WaitFor(t, "sum to run", 30*time.Second, func() bool {
			j := c.Job("gone")
			return j.Vertices[1].Subtasks[0].State == wire.StateRunning
		})
		require.NoError(t, c.Client.CancelJob(c.ctx(), "gone"))
		c.WaitJob("gone", 30*time.Second, "CANCELED")
		c.waitNoBytes(t, "gone")

		c.Submit("bad", jobSpec(t, "bad", map[string]any{"strategy": "none"},
			vertex{ID: "gen", Parallelism: 2, Command: []string{"sh", "-c", `echo 1 > "$JOBMASTER_OUTPUT_DIR/sum/0"`}},
			vertex{ID: "sum", Parallelism: 1, Command: []string{"sh", "-c", "exit 3"}, Inputs: []map[string]any{{"from": "gen", "mode": "blocking"}}}))
		c.WaitJob("bad", 30*time.Second, "FAILED")
		c.waitNoBytes(t, "bad")
	})
}

// producerHost returns an executor that ran a gen subtask and no live
// task of the job (it holds only partitions), and the gen subtasks it ran.
func producerHost(t *testing.T, c *Cluster, j *api.Job) (*Node, []int) {
	busy := map[string]bool{}
	for _, v := range j.Vertices {
		for _, s := range v.Subtasks {
			if !s.State.Terminal() {
				busy[s.Executor] = true
			}
		}
	}
	for _, s := range j.Vertices[0].Subtasks {
		if host := s.Executor; !busy[host] {
			var subs []int
			for _, o := range j.Vertices[0].Subtasks {
				if o.Executor == host {
					subs = append(subs, o.Index)
				}
			}
			return c.Node(host), subs
		}
	}
	t.Fatalf("every executor that ran gen runs a task of %s too", j.ID)
	return nil, nil
}

func genFinished(j *api.Job) bool {
	for _, s := range j.Vertices[0].Subtasks {
		if s.State != wire.StateFinished {
			return false
		}
	}
	return true
}

// TestPartitionLostWithExecutor: an executor holding gen's output is
// killed after gen finished while sum, not started yet, needs it: the lost
// gen subtasks run again (one restart, the reason in the job's message),
// sum reads the new output and the sum is exact.
func TestPartitionLostWithExecutor(t *testing.T) {
	skipShort(t)
	c := NewCluster(t, Options{Executors: 3, Slots: 2})
	c.WaitExecutorsAlive()
	gate := filepath.Join(t.TempDir(), "go")
	c.Submit("lost", waitingSum(t, "lost", gate, genSumRestart))
	var j *api.Job
	WaitFor(t, "gen to finish", 60*time.Second, func() bool { j = c.Job("lost"); return genFinished(j) })
	host, subs := producerHost(t, c, j)
	host.Kill()
	WaitFor(t, "the loss to be recorded", 30*time.Second, func() bool {
		return strings.Contains(c.Job("lost").Message, "lost with executor "+host.ID)
	})
	require.NoError(t, os.WriteFile(gate, nil, 0o644))
	j = c.WaitJob("lost", 90*time.Second, "FINISHED")
	require.Equal(t, wantSum, c.sumOf(t, "lost"))
	for _, s := range j.Vertices[0].Subtasks {
		again := false
		for _, i := range subs {
			again = again || i == s.Index
		}
		if again {
			require.Positive(t, s.Attempt, "gen/%d was on %s: it runs again", s.Index, host.ID)
		} else {
			require.Zero(t, s.Attempt, "gen/%d's partition was not lost: it does not run again", s.Index)
		}
	}
	// The killed executor comes back with the old partitions on its disk:
	// nobody tracks them, so they are released.
	host.Restart(false)
	c.waitNoBytes(t, "lost")
}

// TestPartitionLostOnDisk: gen/0's partition is deleted behind its
// executor's back: its next report lacks it, gen/0 runs again.
func TestPartitionLostOnDisk(t *testing.T) {
	skipShort(t)
	c := NewCluster(t, Options{Executors: 2, Slots: 3})
	c.WaitExecutorsAlive()
	gate := filepath.Join(t.TempDir(), "go")
	c.Submit("wiped", waitingSum(t, "wiped", gate, genSumRestart))
	var j *api.Job
	WaitFor(t, "gen to finish", 60*time.Second, func() bool { j = c.Job("wiped"); return genFinished(j) })
	host := c.Node(j.Vertices[0].Subtasks[0].Executor)
	id := j.Vertices[0].Subtasks[0].ExecutionID
	removePartition(t, host, id)
	WaitFor(t, "the loss to be recorded", 30*time.Second, func() bool {
		return strings.Contains(c.Job("wiped").Message, "partition of gen/0")
	})
	require.NoError(t, os.WriteFile(gate, nil, 0o644))
	j = c.WaitJob("wiped", 90*time.Second, "FINISHED")
	require.Equal(t, wantSum, c.sumOf(t, "wiped"))
	require.Positive(t, j.Vertices[0].Subtasks[0].Attempt, "gen/0 ran again")
	c.waitNoBytes(t, "wiped")
}

// removePartition deletes partition id from host's disk behind its back.
func removePartition(t *testing.T, host *Node, id string) {
	t.Helper()
	var removed []string
	_ = filepath.WalkDir(filepath.Join(host.DataDir, "partitions"), func(path string, d fs.DirEntry, err error) error {
		if err == nil && d.IsDir() && strings.HasSuffix(filepath.ToSlash(path), id) {
			removed = append(removed, path)
			return filepath.SkipDir
		}
		return nil
	})
	require.NotEmpty(t, removed, "gen/0's partition (%s) on disk under %s", id, host.DataDir)
	for _, p := range removed {
		require.NoError(t, os.RemoveAll(p))
	}
}

// TestAnInputLostAfterItWasReadRestartsNothing: sum runs, so it has
// fetched gen's output whole, when gen/0's partition is deleted: the state
// stops tracking it and nothing runs again; sum adds up what it read.
func TestAnInputLostAfterItWasReadRestartsNothing(t *testing.T) {
	skipShort(t)
	c := NewCluster(t, Options{Executors: 2, Slots: 3})
	gate, j := c.runHeldSum(t, "read")
	host := j.Vertices[0].Subtasks[0].Executor
	held := func() int { x, _ := c.findExecutor(host); return x.Partitions }
	before := held()
	require.Positive(t, before)
	removePartition(t, c.Node(host), j.Vertices[0].Subtasks[0].ExecutionID)
	WaitFor(t, "the loss to be recorded", 30*time.Second, func() bool { return held() == before-1 })
	require.NoError(t, os.WriteFile(gate, nil, 0o644))
	j = c.WaitJob("read", 60*time.Second, "FINISHED")
	require.Equal(t, wantSum, c.sumOf(t, "read"))
	require.Zero(t, j.Restarts, j.Message)
	for k, s := range subtasks(j) {
		require.Zero(t, s.Attempt, "%s ran again", k)
	}
	c.waitNoBytes(t, "read")
}

// TestLeaderKilledBetweenProducerAndConsumer: the partitions' locations are
// replicated: a new leader runs the consumer against them and re-runs
// nothing.
func TestLeaderKilledBetweenProducerAndConsumer(t *testing.T) {
	skipShort(t)
	c := NewCluster(t, Options{Executors: 2, Slots: 3})
	c.WaitExecutorsAlive()
	gate := filepath.Join(t.TempDir(), "go")
	c.Submit("handover", waitingSum(t, "handover", gate, genSumRestart))
	WaitFor(t, "gen to finish", 60*time.Second, func() bool { return genFinished(c.Job("handover")) })
	old := c.Leader()
	old.Kill()
	WaitFor(t, "a new leader", 30*time.Second, func() bool {
		l := c.Leader()
		return l != nil && l.ID != old.ID
	})
	require.NoError(t, os.WriteFile(gate, nil, 0o644))
	j := c.WaitJob("handover", 60*time.Second, "FINISHED")
	require.Equal(t, wantSum, c.sumOf(t, "handover"))
	require.Zero(t, j.Restarts)
	for _, v := range j.Vertices {
		for _, s := range v.Subtasks {
			require.Zero(t, s.Attempt, "%s/%d re-ran after a leader failover", v.ID, s.Index)
		}
	}
	c.waitNoBytes(t, "handover")
}
