package jobspec

import "sort"

// Region is a pipelined region: vertices connected by pipelined edges,
// scheduled together and, under region failover, restarted together.
type Region struct {
	// Vertices are indexes into Spec.Vertices, ascending.
	Vertices []int
	// Upstream are the regions whose results this region consumes through
	// blocking edges: it may start only when they have all FINISHED.
	Upstream []int
	// Downstream are the regions that consume this one's results.
	Downstream []int
}

// Regions computes the pipelined regions of a normalized spec. Vertices
// joined by pipelined edges share a region; regions that depend on each
// other in a cycle through blocking edges are merged (otherwise neither could
// start), and a blocking edge inside one region then behaves as pipelined.
// Regions are ordered by their smallest vertex index, and the result depends
// only on the spec.
func (s *Spec) Regions() []Region {
	n := len(s.Vertices)
	index := make(map[string]int, n)
	for i, v := range s.Vertices {
		index[v.ID] = i
	}
	uf := newUnionFind(n)
	for i, v := range s.Vertices {
		for _, in := range v.Inputs {
			if in.Mode != ModeBlocking {
				uf.union(i, index[in.From])
			}
		}
	}
	// Merge regions that form cycles over blocking edges until the region
	// graph is acyclic. Each pass merges at least two regions or stops.
	for {
		comp := s.regionSCCs(uf, index)
		merged := false
		for _, c := range comp {
			for _, x := range c[1:] {
				if uf.union(c[0], x) {
					merged = true
				}
			}
		}
		if !merged {
			break
		}
	}
	// Number regions by smallest vertex index.
	regionOf := make([]int, n)
	rootRegion := make(map[int]int)
	var regions []Region
	for i := 0; i < n; i++ {
		r := uf.find(i)
		id, ok := rootRegion[r]
		if !ok {
			id = len(regions)
			rootRegion[r] = id
			regions = append(regions, Region{})
		}
		regionOf[i] = id
		regions[id].Vertices = append(regions[id].Vertices, i)
	}
	for i, v := range s.Vertices {
		for _, in := range v.Inputs {
			from, to := regionOf[index[in.From]], regionOf[i]
			if from != to {
				regions[to].Upstream = appendUnique(regions[to].Upstream, from)
				regions[from].Downstream = appendUnique(regions[from].Downstream, to)
			}
		}
	}
	for i := range regions {
		sort.Ints(regions[i].Upstream)
		sort.Ints(regions[i].Downstream)
	}
	return regions
}

// regionSCCs returns, for the graph whose nodes are union-find roots and whose
// edges are blocking edges between them, the strongly connected components
// with more than one node (as lists of roots).
func (s *Spec) regionSCCs(uf *unionFind, index map[string]int) [][]int {
	n := len(s.Vertices)
	adj := make(map[int][]int)
	for i, v := range s.Vertices {
		for _, in := range v.Inputs {
			a, b := uf.find(index[in.From]), uf.find(i)
			if a != b {
				adj[a] = append(adj[a], b)
			}
		}
	}
	// Tarjan's algorithm over roots, visited in vertex order for determinism.
	idx := make(map[int]int)
	low := make(map[int]int)
	on := make(map[int]bool)
	var stack []int
	var out [][]int
	counter := 0
	var strong func(v int)
	strong = func(v int) {
		idx[v] = counter
		low[v] = counter
		counter++
		stack = append(stack, v)
		on[v] = true
		for _, w := range adj[v] {
			if _, seen := idx[w]; !seen {
				strong(w)
				low[v] = min(low[v], low[w])
			} else if on[w] {
				low[v] = min(low[v], idx[w])
			}
		}
		if low[v] == idx[v] {
			var comp []int
			for {
				w := stack[len(stack)-1]
				stack = stack[:len(stack)-1]
				on[w] = false
				comp = append(comp, w)
				if w == v {
					break
				}
			}
			if len(comp) > 1 {
				sort.Ints(comp)
				out = append(out, comp)
			}
		}
	}
	for i := 0; i < n; i++ {
		r := uf.find(i)
		if _, seen := idx[r]; !seen {
			strong(r)
		}
	}
	return out
}

func appendUnique(s []int, v int) []int {
	for _, x := range s {
		if x == v {
			return s
		}
	}
	return append(s, v)
}

type unionFind struct{ parent []int }

func newUnionFind(n int) *unionFind {
	p := make([]int, n)
	for i := range p {
		p[i] = i
	}
	return &unionFind{parent: p}
}

func (u *unionFind) find(x int) int {
	for u.parent[x] != x {
		u.parent[x] = u.parent[u.parent[x]]
		x = u.parent[x]
	}
	return x
}

// union joins the sets of a and b, keeping the smaller root, and reports
// whether they were separate.
func (u *unionFind) union(a, b int) bool {
	ra, rb := u.find(a), u.find(b)
	if ra == rb {
		return false
	}
	if rb < ra {
		ra, rb = rb, ra
	}
	u.parent[rb] = ra
	return true
}

// SlotsAtOnce is how many slots region r needs to be placed: one per
// subtask index of each slot sharing group among its vertices (the widest
// vertex of each group sets its count).
func (s *Spec) SlotsAtOnce(r Region) int {
	widest := make(map[string]int)
	for _, vi := range r.Vertices {
		v := &s.Vertices[vi]
		widest[v.SlotSharingGroup] = max(widest[v.SlotSharingGroup], v.Parallelism)
	}
	n := 0
	for _, w := range widest {
		n += w
	}
	return n
}

// StartSlots is the fewest free slots that let the job start: the smallest
// need among its regions that consume no other region's results.
func (s *Spec) StartSlots() int {
	least := 0
	for _, r := range s.Regions() {
		if len(r.Upstream) > 0 {
			continue
		}
		if n := s.SlotsAtOnce(r); least == 0 || n < least {
			least = n
		}
	}
	return least
}
