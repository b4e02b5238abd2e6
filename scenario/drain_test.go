package scenario

import (
	"jobmaster/fsm"
)

func init() {
	handlers["drain"] = cmdDrain
	handlers["undrain"] = cmdUndrain
}

// drain e1 [deadline=30s] [token=N]: an operator drains an executor
// (drain-executor); the leader's ticks move its work at the deadline.
func cmdDrain(c *cluster, cmd command) error {
	id, err := cmd.arg(0)
	if err != nil {
		return err
	}
	if _, err := c.executor(id); err != nil {
		return err
	}
	deadline, err := cmd.duration("deadline", 0)
	if err != nil {
		return err
	}
	token, err := c.tokenOf(cmd)
	if err != nil {
		return err
	}
	c.apply(&fsm.DrainExecutor{Fenced: c.fenced(token), Executor: id, DeadlineMs: deadline.Milliseconds()})
	return nil
}

// undrain e1 [token=N]: the executor is eligible again (undrain-executor).
func cmdUndrain(c *cluster, cmd command) error {
	id, err := cmd.arg(0)
	if err != nil {
		return err
	}
	token, err := c.tokenOf(cmd)
	if err != nil {
		return err
	}
	c.apply(&fsm.UndrainExecutor{Fenced: c.fenced(token), Executor: id})
	return nil
}
