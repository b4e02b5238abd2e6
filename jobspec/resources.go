package jobspec

import "fmt"

// Bounds on what one task may ask for: beyond any one host.
const (
	// MaxCPUMillis is 1,000 cores.
	MaxCPUMillis = 1_000_000
	// MaxMemoryMB is 16 TiB.
	MaxMemoryMB = 16 << 20
)

// Resources is what each task of a vertex needs of its executor: CPU in
// thousandths of a core, and memory in MiB. Zero asks for nothing of that
// kind: the task is placed by slots alone, and not limited. An executor
// whose runtime enforces them (exec, with cgroup v2 or v1) caps the task
// there: CPU time at CPUMillis per second of wall time, memory at
// MemoryMB (a task that needs more is killed and FAILED "out of memory").
type Resources struct {
	CPUMillis int64 `json:"cpu_millis,omitempty"`
	MemoryMB  int64 `json:"memory_mb,omitempty"`
}

// IsZero reports whether r asks for nothing.
func (r Resources) IsZero() bool { return r.CPUMillis == 0 && r.MemoryMB == 0 }

// Add returns the sum of r and o.
func (r Resources) Add(o Resources) Resources {
	return Resources{CPUMillis: r.CPUMillis + o.CPUMillis, MemoryMB: r.MemoryMB + o.MemoryMB}
}

// Fits reports whether r fits within capacity c.
func (r Resources) Fits(c Resources) bool {
	return r.CPUMillis <= c.CPUMillis && r.MemoryMB <= c.MemoryMB
}

// Of returns the resources a vertex's tasks need (zero if it declares
// none).
func (v *Vertex) Of() Resources {
	if v.Resources == nil {
		return Resources{}
	}
	return *v.Resources
}

// normalizeResources checks a vertex's resources (field f) and drops an
// empty declaration, so that a spec without one and a spec with an empty
// one are the same spec.
func normalizeResources(f string, v *Vertex) error {
	r := v.Resources
	if r == nil {
		return nil
	}
	if r.CPUMillis < 0 || r.CPUMillis > MaxCPUMillis {
		return fieldErr(f+".resources.cpu_millis", "must be between 0 and %d (thousandths of a core), got %d", MaxCPUMillis, r.CPUMillis)
	}
	if r.MemoryMB < 0 || r.MemoryMB > MaxMemoryMB {
		return fieldErr(f+".resources.memory_mb", "must be between 0 and %d (MiB), got %d", MaxMemoryMB, r.MemoryMB)
	}
	if r.IsZero() {
		v.Resources = nil
	}
	return nil
}

// String is how a message shows r: "cpu_millis=500 memory_mb=256".
func (r Resources) String() string {
	return fmt.Sprintf("cpu_millis=%d memory_mb=%d", r.CPUMillis, r.MemoryMB)
}

// UnmarshalJSON decodes resources strictly, naming a wrong field under
// "resources".
func (r *Resources) UnmarshalJSON(b []byte) error {
	type plain Resources
	var p plain
	if err := decodeStrict(b, &p, "resources"); err != nil {
		return err
	}
	*r = Resources(p)
	return nil
}
