// Package examples holds the example job specs (the *.json files beside
// this one), embedded so that `jobmaster dev` can submit them.
//
//   - wordcount.json: the demo job of `jobmaster dev`, whose words travel
//     through result partitions: split (4) hashes each word to one of the
//     counters (JOBMASTER_OUTPUT_DIR/count/<j>), count (2) counts what it
//     reads from every split subtask (JOBMASTER_INPUT_DIR/split/<i>), and
//     report (1) merges the counts; both edges are blocking.
//   - flaky.json: a task that fails on its first attempts, restarted with
//     exponential-delay under region failover, beside an independent region
//     that is left alone.
//   - sums.json: the two-stage job of docs/api.md: gen (3) sends each of the
//     numbers 1 to 300 to the sum subtask of its parity, sum (2) adds what
//     it reads; the two sums add up to 45150.
//   - wide.json: 24 subtasks in 8 slots, thanks to slot sharing: subtask i of
//     the three pipelined vertices shares one slot.
package examples

import "embed"

// FS holds the example specs.
//
//go:embed *.json
var FS embed.FS

// WordCount is the demo job.
func WordCount() []byte {
	b, err := FS.ReadFile("wordcount.json")
	if err != nil {
		panic(err) // embedded at build time
	}
	return b
}
