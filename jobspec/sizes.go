package jobspec

import (
	"encoding/json"
	"fmt"
	"sort"
)

// Size limits on what a job's tasks are started with. Every task of a
// vertex is deployed with its command and env, in requests an executor
// reads up to 1 MiB of (split as needed: wire.SplitDeploy), and a process
// is started with them. They are checked when a job is submitted (Parse),
// not by Normalize: a spec accepted before a limit existed still applies
// from the replicated log.
const (
	// MaxArgBytes bounds each argument of a command, and each variable of
	// an env as the process gets it (NAME=value): Linux refuses to start a
	// process with a string of 128 KiB or more, its terminating NUL
	// counted (MAX_ARG_STRLEN), so the task would fail at every start.
	MaxArgBytes = 128<<10 - 1
	// MaxTaskBytes bounds the commands and envs of all of a job's
	// vertices together, as JSON (the way they travel to executors):
	// however a deploy of the job's tasks is split, each request then has
	// room for them and for the tasks' inputs.
	MaxTaskBytes = 512 << 10
)

// checkSizes applies the size limits to a normalized spec.
func checkSizes(s *Spec) error {
	total := 0
	for i := range s.Vertices {
		v := &s.Vertices[i]
		f := fmt.Sprintf("vertices[%d]", i)
		for j, a := range v.Command {
			if len(a) > MaxArgBytes {
				return fieldErr(fmt.Sprintf("%s.command[%d]", f, j), "%d bytes, at most %d allowed", len(a), MaxArgBytes)
			}
		}
		names := make([]string, 0, len(v.Env))
		for k := range v.Env {
			names = append(names, k)
		}
		sort.Strings(names)
		for _, k := range names {
			if len(k) > MaxArgBytes {
				return fieldErr(f+".env", "a variable name of %d bytes, at most %d allowed", len(k), MaxArgBytes)
			}
			if n := len(k) + 1 + len(v.Env[k]); n > MaxArgBytes {
				return fieldErr(f+".env."+k, "%d bytes as NAME=value, at most %d allowed", n, MaxArgBytes)
			}
		}
		cmd, _ := json.Marshal(v.Command)
		env, _ := json.Marshal(v.Env)
		total += len(cmd) + len(env)
		if total > MaxTaskBytes {
			return fieldErr(f, "the commands and env of vertices[0] to here take %d bytes as sent to executors, at most %d allowed for the whole job", total, MaxTaskBytes)
		}
	}
	return nil
}
