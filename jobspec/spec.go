package jobspec

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"
)

// Limits on a job spec. They bound what one job can ask of the masters.
const (
	MaxParallelism = 10000
	MaxVertices    = 1000
	MaxIDLength    = 128
)

// Edge modes.
const (
	ModePipelined = "pipelined"
	ModeBlocking  = "blocking"
)

// Edge distributions: which producer subtasks' output a consumer subtask
// reads. All-to-all (the default): subtask j of the consumer reads what every
// producer subtask wrote for j. Forward: subtask j reads only what producer
// subtask j wrote for it; both sides have the same parallelism.
const (
	DistributionAllToAll = "all-to-all"
	DistributionForward  = "forward"
)

// Failover scopes.
const (
	FailoverRegion = "region"
	FailoverFull   = "full"
)

// Restart strategies.
const (
	StrategyNone             = "none"
	StrategyFixedDelay       = "fixed-delay"
	StrategyExponentialDelay = "exponential-delay"
	StrategyFailureRate      = "failure-rate"
)

// DefaultSlotSharingGroup is the group of a vertex that names none: by default
// all vertices of a job share slots.
const DefaultSlotSharingGroup = "default"

// Spec is a job specification. A normalized Spec (see Parse and Normalize)
// has every default filled in, so two specs that mean the same thing compare
// equal.
type Spec struct {
	Name     string   `json:"name,omitempty"`
	Vertices []Vertex `json:"vertices"`
	Restart  *Restart `json:"restart,omitempty"`
	Failover string   `json:"failover,omitempty"`
}

// Vertex is one operator of the job graph.
type Vertex struct {
	ID               string            `json:"id"`
	Parallelism      int               `json:"parallelism"`
	Command          []string          `json:"command"`
	Env              map[string]string `json:"env,omitempty"`
	Inputs           []Input           `json:"inputs,omitempty"`
	SlotSharingGroup string            `json:"slot_sharing_group,omitempty"`
	// Resources is what each of its tasks needs of an executor (nil:
	// nothing beyond a slot); see Resources.
	Resources *Resources `json:"resources,omitempty"`
}

// Input is an edge from the vertex named From into the vertex that lists it.
// A normalized Input leaves Distribution empty for all-to-all, the default,
// so that specs from before distributions existed stay equal to new ones.
type Input struct {
	From         string `json:"from"`
	Mode         string `json:"mode,omitempty"`
	Distribution string `json:"distribution,omitempty"`
}

// Forward reports whether the edge's distribution is forward.
func (in Input) Forward() bool { return in.Distribution == DistributionForward }

// Restart is a restart strategy with its parameters. Which fields apply
// depends on Strategy; see docs/configuration.md for each default.
type Restart struct {
	Strategy string `json:"strategy"`

	// fixed-delay: Attempts restarts, Delay apart.
	// failure-rate: Delay before each restart.
	// exponential-delay: Attempts restarts since the last backoff reset
	// (0: unlimited).
	Attempts int      `json:"attempts,omitempty"`
	Delay    Duration `json:"delay,omitempty"`

	// exponential-delay.
	InitialDelay   Duration `json:"initial_delay,omitempty"`
	MaxDelay       Duration `json:"max_delay,omitempty"`
	Multiplier     float64  `json:"multiplier,omitempty"`
	Jitter         float64  `json:"jitter,omitempty"`
	ResetThreshold Duration `json:"reset_threshold,omitempty"`

	// failure-rate: at most MaxFailures failures within Interval.
	MaxFailures int      `json:"max_failures,omitempty"`
	Interval    Duration `json:"interval,omitempty"`
}

// Duration is a time.Duration written as a Go duration string ("1s",
// "250ms") in JSON. In the replicated state it is an integer of nanoseconds.
type Duration time.Duration

// MarshalJSON writes the duration as a string.
func (d Duration) MarshalJSON() ([]byte, error) {
	return json.Marshal(time.Duration(d).String())
}

// UnmarshalJSON accepts a duration string such as "1s" or "1m30s".
func (d *Duration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return fmt.Errorf("want a duration string such as \"1s\"")
	}
	v, err := time.ParseDuration(strings.TrimSpace(s))
	if err != nil {
		return fmt.Errorf("invalid duration %q", s)
	}
	*d = Duration(v)
	return nil
}

// Std returns the duration as a time.Duration.
func (d Duration) Std() time.Duration { return time.Duration(d) }

// Milliseconds returns the duration in whole milliseconds.
func (d Duration) Milliseconds() int64 { return time.Duration(d).Milliseconds() }

// TotalSubtasks is the number of subtasks over all vertices.
func (s *Spec) TotalSubtasks() int {
	n := 0
	for _, v := range s.Vertices {
		n += v.Parallelism
	}
	return n
}

// VertexIndex returns the position of the vertex with the given id, or -1.
func (s *Spec) VertexIndex(id string) int {
	for i := range s.Vertices {
		if s.Vertices[i].ID == id {
			return i
		}
	}
	return -1
}
