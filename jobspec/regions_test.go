package jobspec

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func spec(t *testing.T, body string) *Spec {
	t.Helper()
	s, err := Parse([]byte(body))
	require.NoError(t, err)
	return s
}

func TestRegionsPipelinedAndBlocking(t *testing.T) {
	// source -pipelined-> map -blocking-> sink
	s := spec(t, `{"vertices":[
		{"id":"source","parallelism":2,"command":["x"]},
		{"id":"map","parallelism":2,"command":["x"],"inputs":[{"from":"source","mode":"pipelined"}]},
		{"id":"sink","parallelism":1,"command":["x"],"inputs":[{"from":"map","mode":"blocking"}]}]}`)
	require.Equal(t, []Region{
		{Vertices: []int{0, 1}, Downstream: []int{1}},
		{Vertices: []int{2}, Upstream: []int{0}},
	}, s.Regions())
}

func TestRegionsIndependentSources(t *testing.T) {
	s := spec(t, `{"vertices":[
		{"id":"a","parallelism":1,"command":["x"]},
		{"id":"b","parallelism":1,"command":["x"]},
		{"id":"c","parallelism":1,"command":["x"],"inputs":[{"from":"a","mode":"blocking"},{"from":"b","mode":"blocking"}]}]}`)
	require.Equal(t, []Region{
		{Vertices: []int{0}, Downstream: []int{2}},
		{Vertices: []int{1}, Downstream: []int{2}},
		{Vertices: []int{2}, Upstream: []int{0, 1}},
	}, s.Regions())
}

func TestRegionsBlockingCycleIsMerged(t *testing.T) {
	// a -blocking-> b -pipelined-> c -blocking-> d, and a -pipelined-> d:
	// regions {a,d} and {b,c} would wait on each other, so they merge.
	s := spec(t, `{"vertices":[
		{"id":"a","parallelism":1,"command":["x"]},
		{"id":"b","parallelism":1,"command":["x"],"inputs":[{"from":"a","mode":"blocking"}]},
		{"id":"c","parallelism":1,"command":["x"],"inputs":[{"from":"b"}]},
		{"id":"d","parallelism":1,"command":["x"],"inputs":[{"from":"c","mode":"blocking"},{"from":"a"}]}]}`)
	require.Equal(t, []Region{{Vertices: []int{0, 1, 2, 3}}}, s.Regions())
}

func TestRegionsBlockingInsideRegion(t *testing.T) {
	// a feeds b and c pipelined; b -> c blocking lies inside one region.
	s := spec(t, `{"vertices":[
		{"id":"a","parallelism":1,"command":["x"]},
		{"id":"b","parallelism":1,"command":["x"],"inputs":[{"from":"a"}]},
		{"id":"c","parallelism":1,"command":["x"],"inputs":[{"from":"a"},{"from":"b","mode":"blocking"}]}]}`)
	require.Equal(t, []Region{{Vertices: []int{0, 1, 2}}}, s.Regions())
}

func TestStartSlots(t *testing.T) {
	for _, tc := range []struct {
		name, spec string
		want       int
	}{
		{"one vertex", `{"vertices":[{"id":"a","parallelism":12,"command":["x"]}]}`, 12},
		{"pipelined, one group: the widest", `{"vertices":[{"id":"a","parallelism":4,"command":["x"]},
			{"id":"b","parallelism":6,"command":["x"],"inputs":[{"from":"a","mode":"pipelined"}]}]}`, 6},
		{"pipelined, two groups: the sum", `{"vertices":[{"id":"a","parallelism":4,"command":["x"],"slot_sharing_group":"g1"},
			{"id":"b","parallelism":4,"command":["x"],"slot_sharing_group":"g2","inputs":[{"from":"a","mode":"pipelined"}]}]}`, 8},
		{"a wider region behind a blocking edge does not count", `{"vertices":[{"id":"a","parallelism":2,"command":["x"]},
			{"id":"b","parallelism":50,"command":["x"],"inputs":[{"from":"a","mode":"blocking"}]}]}`, 2},
		{"independent regions: the smallest", `{"vertices":[{"id":"a","parallelism":5,"command":["x"]},{"id":"b","parallelism":3,"command":["x"]}]}`, 3},
	} {
		s, err := Parse([]byte(tc.spec))
		require.NoError(t, err, tc.name)
		require.Equal(t, tc.want, s.StartSlots(), tc.name)
	}
}
