// Package scenario holds scenario tests of the leader: text files under
// testdata/ that read like transcripts of what the leader and the executors
// do, run without network or real clock. The leader is the production core
// (package leader's Core, which package master runs, with package fsm,
// placement and reconcile under it); the harness plays the world around it:
// executors, the network, the clock. The package has test code only.
//
// # Format
//
// A scenario file is a sequence of blocks separated by blank lines; lines
// starting with '#' between blocks are comments. A block is a command line,
// optional input lines (a JSON job spec), a "----" line and the expected
// output:
//
//	submit a
//	{"vertices": [{"id": "v", "parallelism": 2, "command": ["run"]}]}
//	----
//	submit-job a
//	job a: CREATED
//
// go test ./scenario/ -update rewrites every expected output with the
// actual one; read the diff before committing it. A file whose first
// command is "skip <reason>" documents a known bug: its expected output is
// the correct behaviour (written by hand), and it runs only with -noskip.
//
// # Commands
//
// The world: a virtual clock (starting at t=0s, moved only by tick), the
// replicated state (an fsm.State, each command committed in a log entry of
// the next index), one leader at a time and simulated executors.
//
//	config interval=1s timeout=10s ack-deadline=5s
//	                           leader timings (these are the defaults)
//	add-executor e1 slots=2 [lease=6s] [renew-on=any]
//	                           an executor joins; with a lease it stops its
//	                           tasks when no heartbeat renewed it for that
//	                           long (renew-on=any: deploys and cancels renew
//	                           it too)
//	establish m1               a new leader commits establish-leadership; its
//	                           index is the fencing token. Its core knows
//	                           every executor (gossip) and gives work only to
//	                           those that answered one of its heartbeats
//	spec NAME + JSON           names a job spec
//	submit a [spec=NAME] + JSON
//	cancel a
//	forget a [b ...]           forget-jobs: garbage-collect ended jobs
//	schedule                   the core's scheduling pass: placement.Plan over
//	                           the ready regions and the executors that take
//	                           work; the placements are committed and deploy
//	                           requests sent
//	deliver [e1|all]           deploy requests in flight reach the executor,
//	                           which starts the tasks and answers; the answer
//	                           is reconciled as a partial report
//	drop e1                    the network loses the deploys in flight to e1
//	heartbeat e1|all           heartbeat (carrying the acks queued for the
//	                           executor) and answer: the report is reconciled
//	send-heartbeat e1|all      the executor answers, the answer stays in flight
//	receive-heartbeat e1|all   the oldest answer in flight reaches the leader
//	exit e1 ID code=N          a task ends: 0 FINISHED, else FAILED
//	hang e1 ID                 the task will ignore a cancel (stays CANCELING)
//	kill-executor e1           the process dies with its tasks
//	restart-executor e1        a new process, holding nothing
//	freeze-executor e1         the machine pauses: no answers, tasks kept
//	thaw-executor e1           the machine resumes (and stops its tasks if its
//	                           lease ran out meanwhile)
//	mute-executor e1           requests reach e1 and it acts on them, but its
//	                           answers are lost
//	unmute-executor e1         its answers get through again
//	tick 5s [heartbeats] [leader-paused]
//	                           the clock moves in heartbeat-interval steps;
//	                           after each, leases run out and the leader ticks:
//	                           it judges liveness (executor-lost), restarts
//	                           what is due and, with heartbeats, heartbeats
//	                           every executor. leader-paused: the leader's
//	                           process is paused until the last step
//	jobs, job a, executor e1|all
//	                           views
//
// Leader commands (submit, cancel, forget, schedule, heartbeat,
// send-heartbeat) take token=N to play a leader of an older term whose
// goroutine is still at work (a stale token).
//
// The leader is carried out as package master carries it (master/carry.go):
// a Ready's commands are proposed in one entry, then its cancels are sent
// and its deployments put in flight; acks go with the executor's next
// heartbeat; every change of the state sends the cancels it asks for at
// once. A command with token=N is carried out by the core of that earlier
// session, with its memory.
//
// The network: a deploy request is delivered at most once, in any order
// with heartbeats, or lost (drop, kill-executor); a request still in flight
// past the ack deadline after the execution's placement is dropped, the
// bound the reconciler's expiry rule relies on. Executors refuse requests
// whose token is older than the newest they have seen.
//
// # Output
//
// Committed commands in short form ("place a region=0 -> e1/0 e2/0",
// "report e1: a/v/0/0 RUNNING", "fail e1 a/v/1/0: missing on executor e1",
// "executor-lost e1", "restart a"), with ": refused: <error>" when the FSM
// refused one; job status changes ("job a: RUNNING -> RESTARTING (cause)");
// actions on executors ("deploy e1 ...", "redeploy e1 ...", "cancel e1 ...",
// "ack e1 ..."); what executors do and say ("e1 starts ...", "e1 holds ...");
// the leader's view of liveness ("e1: alive -> suspect"). Lines starting with
// "!!" are invariant violations (see invariants); only
// 20-only-heartbeats-renew-the-lease.txt expects one, to show a hazard.
package scenario

import (
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

var (
	update = flag.Bool("update", false, "rewrite the expected output of the scenarios")
	noskip = flag.Bool("noskip", false, "also run the scenarios marked skip (known bugs)")
)

// defaultChecks is the number of random runs of each property test when
// neither -rapid.checks nor RAPID_CHECKS says otherwise (rapid's own default
// is 100). A run costs about a millisecond, or a few under -race.
const defaultChecks = "300"

func TestMain(m *testing.M) {
	flag.Parse()
	set := os.Getenv("RAPID_CHECKS") != ""
	flag.Visit(func(f *flag.Flag) { set = set || f.Name == "rapid.checks" })
	if !set {
		if err := flag.Set("rapid.checks", defaultChecks); err != nil {
			panic(err)
		}
	}
	os.Exit(m.Run())
}

func TestScenarios(t *testing.T) {
	files, err := filepath.Glob("testdata/*.txt")
	if err != nil {
		t.Fatal(err)
	}
	if len(files) == 0 {
		t.Fatal("no scenarios in testdata")
	}
	for _, path := range files {
		name := strings.TrimSuffix(filepath.Base(path), ".txt")
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			runScript(t, path)
		})
	}
}

func runScript(t *testing.T, path string) {
	s, err := readScript(path)
	if err != nil {
		t.Fatal(err)
	}
	c := newCluster()
	for _, it := range s.items {
		b := it.block
		if b == nil {
			continue
		}
		if b.cmd.name == "skip" {
			if !*noskip {
				t.Skipf("%s:%d: %s", path, b.line, strings.TrimPrefix(b.cmd.text, "skip "))
			}
			b.got = []string{"ok"}
			continue
		}
		got, err := c.run(b.cmd)
		if err != nil {
			t.Fatalf("%s:%d: %s: %v", path, b.line, b.cmd.text, err)
		}
		b.got = got
		if *update {
			continue
		}
		if strings.Join(got, "\n") != strings.Join(b.want, "\n") {
			t.Fatalf("%s:%d: %s\nwant:\n%s\ngot:\n%s", path, b.line, b.cmd.text,
				indent(b.want), indent(got))
		}
	}
	if *update {
		if err := os.WriteFile(path, []byte(s.render()), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func indent(lines []string) string {
	if len(lines) == 0 {
		return "    (nothing)"
	}
	return "    " + strings.Join(lines, "\n    ")
}
