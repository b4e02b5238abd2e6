package jobspec

// Footprint weights of a spec's parts beyond their strings' bytes: about
// what each takes in a master's memory (a struct, a slice or map entry, the
// headers of its strings).
const (
	footprintSpec     = 128
	footprintVertex   = 160
	footprintArg      = 16
	footprintEnvVar   = 48
	footprintInput    = 48
	footprintResource = 32
)

// Footprint is what a spec costs a master to hold, in bytes: its strings'
// bytes, plus a fixed weight for the spec, each vertex, argument, env
// variable, input and resource block. It is what --max-spec-bytes counts:
// an estimate of memory, not the size of any encoding, cheap enough to
// take at every submit and on every master as it applies one. The same
// spec always gives the same footprint, so a state that adds a job's
// footprint when it is submitted takes the same away when it is forgotten.
func (s *Spec) Footprint() int64 {
	n := int64(footprintSpec + len(s.Name) + len(s.Failover))
	if s.Restart != nil {
		n += int64(len(s.Restart.Strategy))
	}
	for i := range s.Vertices {
		v := &s.Vertices[i]
		n += int64(footprintVertex + len(v.ID) + len(v.SlotSharingGroup))
		for _, a := range v.Command {
			n += int64(footprintArg + len(a))
		}
		for k, val := range v.Env {
			n += int64(footprintEnvVar + len(k) + len(val))
		}
		for _, in := range v.Inputs {
			n += int64(footprintInput + len(in.From) + len(in.Mode) + len(in.Distribution))
		}
		if v.Resources != nil {
			n += footprintResource
		}
	}
	return n
}
