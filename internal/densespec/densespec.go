// Package densespec makes the job spec of a dense graph, for the tests and
// benchmarks of what such a job costs: n vertices v0 to v<n-1> of
// parallelism p, each reading (all-to-all, pipelined) the fanIn vertices
// before it.
package densespec

import (
	"fmt"
	"strings"
)

// JSON is the spec, as a client sends it.
func JSON(n, p, fanIn int) string {
	var sb strings.Builder
	sb.WriteString(`{"vertices":[`)
	for i := 0; i < n; i++ {
		if i > 0 {
			sb.WriteString(",")
		}
		fmt.Fprintf(&sb, `{"id":"v%d","parallelism":%d,"command":["x"]`, i, p)
		if i > 0 {
			sb.WriteString(`,"inputs":[`)
			for k := max(0, i-fanIn); k < i; k++ {
				if k > max(0, i-fanIn) {
					sb.WriteString(",")
				}
				fmt.Fprintf(&sb, `{"from":"v%d"}`, k)
			}
			sb.WriteString("]")
		}
		sb.WriteString("}")
	}
	sb.WriteString(`]}`)
	return sb.String()
}
