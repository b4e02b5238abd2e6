package integration

import (
	"bufio"
	"fmt"
	"os"
	"sort"
	"strconv"
	"strings"
)

// The tasks of these tests append lines to a history file named by the
// HISTORY environment variable (each executor passes its environment on):
//
//	<event> <execution id> <unix nanoseconds> <executor id> [<pid>]
//
// with event start, alive, term (got SIGTERM), fail (about to exit non-zero
// on purpose) or end (exited by itself). The pid, written by the chaos
// tasks, tells two runs of the same execution id apart.

// historyTask is a shell command that records start, one alive line every
// 100 ms for the given duration, and end; on SIGTERM it records term and
// exits 143. exitCode makes it fail at the end (for restart tests).
func historyTask(seconds float64, extra string) []string {
	script := fmt.Sprintf(`h="$HISTORY"; id="$JOBMASTER_EXECUTION_ID"; ex="$JOBMASTER_EXECUTOR_ID"
rec() { echo "$1 $id $(date +%%s%%N) $ex" >> "$h"; }
trap 'rec term; exit 143' TERM
rec start
n=$(awk 'BEGIN{print int(%g*10)}')
i=0
while [ $i -lt $n ]; do rec alive; sleep 0.1; i=$((i+1)); done
%s
rec end`, seconds, extra)
	return []string{"sh", "-c", script}
}

// chaosTask is the chaos workload's task: it records start, then alive
// every 150 ms for CHAOS_TICKS ticks, then end, or fail and exit 3 when it
// fails on purpose: always if CHAOS_FAIL_BELOW is negative, else while
// its attempt number is below CHAOS_FAIL_BELOW. On SIGTERM it records
// term and exits 143. Each record carries the executor and the shell's pid.
func chaosTask() []string {
	return []string{"sh", "-c", `h="$HISTORY"; id="$JOBMASTER_EXECUTION_ID"; ex="$JOBMASTER_EXECUTOR_ID"
rec() { echo "$1 $id $(date +%s%N) $ex $$" >> "$h"; }
trap 'rec term; exit 143' TERM
rec start
i=0
while [ $i -lt "$CHAOS_TICKS" ]; do sleep 0.15; rec alive; i=$((i+1)); done
if [ "$CHAOS_FAIL_BELOW" -lt 0 ] || [ "$JOBMASTER_ATTEMPT" -lt "$CHAOS_FAIL_BELOW" ]; then rec fail; exit 3; fi
rec end`}
}

// Event is one history line.
type Event struct {
	Kind      string
	Execution string
	At        int64
	Executor  string
	Pid       int // 0 when not recorded
}

// Subtask is the execution id without its attempt.
func (e Event) Subtask() string {
	i := strings.LastIndexByte(e.Execution, '/')
	if i < 0 {
		return e.Execution
	}
	return e.Execution[:i]
}

// Attempt is the attempt number of the execution id.
func (e Event) Attempt() int {
	i := strings.LastIndexByte(e.Execution, '/')
	n, _ := strconv.Atoi(e.Execution[i+1:])
	return n
}

func readHistory(path string) ([]Event, error) {
	f, err := os.Open(path)
	if os.IsNotExist(err) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []Event
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		p := strings.Fields(sc.Text())
		if len(p) < 3 {
			continue // a line torn by SIGKILL
		}
		at, err := strconv.ParseInt(p[2], 10, 64)
		if err != nil {
			continue
		}
		ev := Event{Kind: p[0], Execution: p[1], At: at}
		if len(p) > 3 {
			ev.Executor = p[3]
		}
		if len(p) > 4 {
			ev.Pid, _ = strconv.Atoi(p[4])
		}
		out = append(out, ev)
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].At < out[j].At })
	return out, sc.Err()
}

// Starts counts start events per execution id.
func Starts(h []Event) map[string]int {
	out := map[string]int{}
	for _, e := range h {
		if e.Kind == "start" {
			out[e.Execution]++
		}
	}
	return out
}

// interval is the span of one execution's records.
type interval struct {
	execution string
	from, to  int64
}

// Overlaps returns, per subtask, pairs of attempts whose recorded lives
// overlap: the property that at most one attempt of a subtask is alive.
// Slack forgives records closer than this (in nanoseconds), since a record
// is written a moment after the moment it describes.
func Overlaps(h []Event, slack int64) []string {
	spans := map[string]*interval{}
	for _, e := range h {
		s, ok := spans[e.Execution]
		if !ok {
			spans[e.Execution] = &interval{execution: e.Execution, from: e.At, to: e.At}
			continue
		}
		s.from, s.to = min(s.from, e.At), max(s.to, e.At)
	}
	bySubtask := map[string][]*interval{}
	for _, s := range spans {
		sub := Event{Execution: s.execution}.Subtask()
		bySubtask[sub] = append(bySubtask[sub], s)
	}
	var out []string
	for sub, l := range bySubtask {
		sort.Slice(l, func(i, j int) bool { return l[i].from < l[j].from })
		for i := 1; i < len(l); i++ {
			if l[i].from+slack < l[i-1].to {
				out = append(out, fmt.Sprintf("%s: %s lived until %d but %s started at %d",
					sub, l[i-1].execution, l[i-1].to, l[i].execution, l[i].from))
			}
		}
	}
	sort.Strings(out)
	return out
}
