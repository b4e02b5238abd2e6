package leader

import (
	"errors"

	"jobmaster/fsm"
)

// Tally counts what a Ready does, for the masters' metrics: package master
// adds it up once it has carried the Ready out. What needs a commit is
// counted by Committed, from the results; a Ready whose proposal failed
// counts nothing (Failed).
type Tally struct {
	// UnknownCancelled: executions an executor held that the leader does
	// not expect there, sent a cancel.
	UnknownCancelled int
	// MissingFailed: deployed executions a full report lacked, failed.
	MissingFailed int
	// DeploysExpired: deployments not acknowledged in time, failed.
	DeploysExpired int
	// Redeployed: pending executions deployed again.
	Redeployed int
	// PartitionsReleased: partitions nobody needs that an executor was
	// asked to delete; PartitionsLost: tracked partitions an executor no
	// longer holds, recorded lost.
	PartitionsReleased int
	PartitionsLost     int
	// RegionsPlaced and ExecutionsPlaced: committed placements.
	RegionsPlaced    int
	ExecutionsPlaced int
	// ExecutorsLost: executor-lost commands committed.
	ExecutorsLost int
	// Restarts: the restarts the committed commands caused, by reason
	// (fsm.Reason*).
	Restarts map[string]int
}

// Add adds o to t.
func (t *Tally) Add(o Tally) {
	t.UnknownCancelled += o.UnknownCancelled
	t.MissingFailed += o.MissingFailed
	t.DeploysExpired += o.DeploysExpired
	t.Redeployed += o.Redeployed
	t.PartitionsReleased += o.PartitionsReleased
	t.PartitionsLost += o.PartitionsLost
	t.RegionsPlaced += o.RegionsPlaced
	t.ExecutionsPlaced += o.ExecutionsPlaced
	t.ExecutorsLost += o.ExecutorsLost
	for k, n := range o.Restarts {
		if t.Restarts == nil {
			t.Restarts = make(map[string]int)
		}
		t.Restarts[k] += n
	}
}

// committed adds to t what the results of a committed proposal say: the
// placements accepted, the executors marked lost, the restarts caused, and
// (unless the commands came too late for the epoch) pending, what counted
// on the commit.
func (t *Tally) committed(cmds []fsm.Command, results []fsm.Result, pending Tally) {
	stale := false
	for i, res := range results {
		if errors.Is(res.Err, fsm.ErrStaleToken) {
			stale = true
		}
		for _, ev := range res.EventsBut(fsm.TopicExecution) {
			if ev.Type == fsm.EventJobRestart {
				t.Add(Tally{Restarts: map[string]int{ev.Reason: 1}})
			}
		}
		if res.Err != nil || i >= len(cmds) {
			continue
		}
		switch cmds[i].(type) {
		case *fsm.PlaceRegion:
			t.RegionsPlaced++
			t.ExecutionsPlaced += len(res.Placed)
		case *fsm.ExecutorLost:
			t.ExecutorsLost++
		}
	}
	if !stale {
		t.Add(pending)
	}
}
