package scenario

import (
	"fmt"
	"strings"
	"time"

	"jobmaster/fsm"
	"jobmaster/jobspec"
	"jobmaster/wire"
)

// describe formats a committed command in short form, with its outcome when
// the FSM refused it.
func describe(cmd fsm.Command, r fsm.Result) string {
	var s string
	switch c := cmd.(type) {
	case *fsm.EstablishLeadership:
		s = fmt.Sprintf("establish-leadership %s: token %d", c.Node, r.Epoch)
	case *fsm.SubmitJob:
		s = "submit-job " + c.ID
		if r.Err == nil && !r.Created {
			s += ": already there with the same spec"
		}
	case *fsm.CancelJob:
		s = "cancel-job " + c.ID
	case *fsm.PlaceRegion:
		s = fmt.Sprintf("place %s region=%d -> %s", c.Job, c.Region, slotList(c.Slots))
	case *fsm.ReportExecutions:
		parts := make([]string, len(c.Updates))
		for i, u := range c.Updates {
			parts[i] = u.ID + " " + string(u.State)
			if u.Message != "" {
				parts[i] += " (" + u.Message + ")"
			}
		}
		s = fmt.Sprintf("report %s: %s", c.Executor, strings.Join(parts, ", "))
	case *fsm.FailExecutions:
		s = fmt.Sprintf("fail %s %s: %s", c.Executor, strings.Join(c.IDs, " "), c.Reason)
	case *fsm.ExecutorLost:
		s = "executor-lost " + c.Executor
	case *fsm.RestartRegions:
		s = "restart " + c.Job
	case *fsm.ForgetJobs:
		s = "forget " + strings.Join(c.IDs, " ")
	case *fsm.LosePartitions:
		s = fmt.Sprintf("lose-partitions %s %s: %s", c.Executor, strings.Join(c.IDs, " "), c.Reason)
	case *fsm.DrainExecutor:
		s = fmt.Sprintf("drain %s deadline=%s", c.Executor, time.Duration(c.DeadlineMs)*time.Millisecond)
	case *fsm.UndrainExecutor:
		s = "undrain " + c.Executor
	case *fsm.MoveExecutor:
		s = "move " + c.Executor
	default:
		s = fmt.Sprintf("%T", cmd)
	}
	if r.Err != nil {
		s += ": refused: " + r.Err.Error()
	}
	return s
}

// slotList formats slot assignments: "e1/0 e2/0" when every key is in the
// default slot sharing group, else "default: e1/0 e2/0; g: e3/0".
func slotList(slots []fsm.SlotAssign) string {
	var groups []string
	byGroup := map[string][]string{}
	for _, a := range slots {
		if _, ok := byGroup[a.Group]; !ok {
			groups = append(groups, a.Group)
		}
		byGroup[a.Group] = append(byGroup[a.Group], fmt.Sprintf("%s/%d", a.Executor, a.Slot))
	}
	if len(groups) == 1 && groups[0] == jobspec.DefaultSlotSharingGroup {
		return strings.Join(byGroup[groups[0]], " ")
	}
	parts := make([]string, len(groups))
	for i, g := range groups {
		parts[i] = g + ": " + strings.Join(byGroup[g], " ")
	}
	return strings.Join(parts, "; ")
}

// printJobs prints the job list.
func (c *cluster) printJobs() {
	jobs := c.state.Jobs()
	if len(jobs) == 0 {
		c.out.printf("no jobs")
	}
	for _, j := range jobs {
		c.out.printf("%s %s", j.ID, j.Status)
	}
}

// printJob prints a job with the current attempt of every subtask:
//
//	a RUNNING restarts=1
//	  src/0 attempt=1 RUNNING e1/0 deployed@12
//	  src/1 attempt=1 DEPLOYING e2/0 pending@11
//	  sink/0 attempt=0 SCHEDULED
//
// A live placed execution is pending (with the index of its placement) or
// deployed (with the index of the acknowledgment).
func (c *cluster) printJob(id string) {
	v, ok := c.state.Job(id)
	if !ok {
		c.out.printf("no job %s", id)
		return
	}
	c.out.printf("%s %s restarts=%d", v.ID, v.Status, v.Restarts)
	if v.Message != "" {
		c.out.printf("  message: %s", v.Message)
	}
	for _, vx := range v.Vertices {
		for _, e := range vx.Subtasks {
			c.out.printf("  %s", executionLine(e))
		}
	}
}

func executionLine(e fsm.Execution) string {
	s := fmt.Sprintf("%s/%d attempt=%d %s", e.Vertex, e.Subtask, e.Attempt, e.State)
	if e.State == wire.StateScheduled || e.Executor == "" {
		if e.Message != "" {
			s += " (" + e.Message + ")"
		}
		return s
	}
	s += fmt.Sprintf(" %s/%d", e.Executor, e.Slot)
	switch {
	case e.State.Terminal():
		if e.Message != "" && e.State != wire.StateFinished {
			s += " (" + e.Message + ")"
		}
	case e.Deployed:
		s += fmt.Sprintf(" deployed@%d", e.AckIndex)
	default:
		s += fmt.Sprintf(" pending@%d", e.DeployIndex)
	}
	return s
}

// printExecutor prints what an executor holds and what is in flight to and
// from it.
func (c *cluster) printExecutor(e *simExecutor) {
	line := fmt.Sprintf("%s %s slots=%d token=%d", e.id, e.status, e.slots, e.token)
	switch {
	case e.lease != 0 && e.lastHeartbeat.IsZero():
		line += fmt.Sprintf(" lease=%s (never renewed)", seconds(e.lease))
	case e.lease != 0:
		line += fmt.Sprintf(" lease=%s (renewed %s ago)", seconds(e.lease), seconds(c.now.Sub(e.lastHeartbeat)))
	}
	if c.core != nil {
		if v, ok := c.core.Status(e.id); ok {
			line += " leader-view=" + string(v)
		}
	}
	c.out.printf("%s", line)
	for _, id := range e.heldIDs() {
		t := e.held[id]
		s := "  " + id + " " + string(t.state)
		if t.message != "" {
			s += " (" + t.message + ")"
		}
		c.out.printf("%s", s)
	}
	if len(e.parts) > 0 {
		c.out.printf("  partitions: %s", strings.Join(e.partIDs(), " "))
	}
	for _, m := range e.inbox {
		c.out.printf("  in flight to %s: deploy %s (token %d)", e.id, m.id, m.token)
	}
	for _, a := range e.answers {
		c.out.printf("  in flight from %s: answer to the heartbeat at index %d", e.id, a.hb.Base)
	}
}
