package wire

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// A deploy too large for one request is split into requests that each fit,
// that together hold every task once, in order.
func TestSplitDeploy(t *testing.T) {
	l := Leader{Version: Version, Cluster: "c", Token: 7, Node: "m1", Addr: "127.0.0.1:7401"}
	env := map[string]string{"BIG": strings.Repeat("e", 100<<10)}
	var tasks []Task
	for v := range 3 {
		for i := range 2000 {
			tasks = append(tasks, Task{ExecutionID: ExecutionID("j", fmt.Sprintf("v%d", v), i, 0), JobID: "j", Vertex: fmt.Sprintf("v%d", v),
				Subtask: i, Parallelism: 2000, Slot: i % 8, Command: []string{"sh", "-c", strings.Repeat("c", 50<<10)}, Env: env})
		}
	}
	for _, limit := range []int{0, 200 << 10, 400 << 10} {
		want := limit
		if want == 0 {
			want = MaxDeployBytes
		}
		reqs := SplitDeploy(l, tasks, limit)
		var got []Task
		for _, r := range reqs {
			b, err := json.Marshal(r)
			require.NoError(t, err)
			require.LessOrEqual(t, len(b), want, "limit %d", limit)
			require.Equal(t, l, r.Leader)
			ts, err := r.Tasks()
			require.NoError(t, err)
			got = append(got, ts...)
		}
		require.Equal(t, tasks, got, "every task once, in order (limit %d)", limit)
		if limit != 0 {
			require.Greater(t, len(reqs), 1)
		}
	}
	// A small deploy is one request, as NewDeployRequest makes it.
	small := tasks[:10]
	require.Equal(t, []DeployRequest{NewDeployRequest(l, small)}, SplitDeploy(l, small, 0))
	require.Empty(t, SplitDeploy(l, nil, 0))
	// A task larger than the limit goes alone.
	reqs := SplitDeploy(l, tasks[:3], 1000)
	require.Len(t, reqs, 3)
}
