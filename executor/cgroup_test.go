package executor

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"jobmaster/wire"
)

// hybridMountinfo is a hybrid host's: v1 controllers, and cgroup2 at
// unified with only hugetlb (the machine the tests run on looks so).
const hybridMountinfo = `31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755
32 31 0:29 / /sys/fs/cgroup/cpu rw,relatime - cgroup cgroup rw,cpu
33 31 0:30 / /sys/fs/cgroup/cpuacct rw,relatime - cgroup cgroup rw,cpuacct
35 31 0:32 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory
39 31 0:36 / /sys/fs/cgroup/pids rw,relatime - cgroup cgroup rw,pids
40 31 0:37 / /sys/fs/cgroup/systemd rw,relatime - cgroup cgroup rw,name=systemd
41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw
`

const hybridProcCgroup = `9:name=systemd:/
8:pids:/
4:memory:/process_api/c5bc
1:cpu:/
0::/
`

func TestParseCgroupMounts(t *testing.T) {
	m := parseCgroupMounts(hybridMountinfo)
	require.Equal(t, &cgroupMount{Point: "/sys/fs/cgroup/unified", Root: "/"}, m.V2)
	require.Equal(t, map[string]cgroupMount{
		"cpu":    {Point: "/sys/fs/cgroup/cpu", Root: "/"},
		"memory": {Point: "/sys/fs/cgroup/memory", Root: "/"},
		"pids":   {Point: "/sys/fs/cgroup/pids", Root: "/"},
	}, m.V1)

	// cpu co-mounted with cpuacct; a container's view of part of a
	// hierarchy; a space in a mount point; a line without fields.
	m = parseCgroupMounts(`50 1 0:40 /docker/abc /sys/fs/cgroup/cpu,cpuacct ro - cgroup cgroup rw,cpu,cpuacct
51 1 0:41 / /mnt/my\040cgroups rw shared:5 - cgroup2 cgroup2 rw,nsdelegate
garbage - x
`)
	require.Equal(t, &cgroupMount{Point: "/mnt/my cgroups", Root: "/"}, m.V2)
	require.Equal(t, map[string]cgroupMount{"cpu": {Point: "/sys/fs/cgroup/cpu,cpuacct", Root: "/docker/abc"}}, m.V1)

	require.Equal(t, cgroupMounts{V1: map[string]cgroupMount{}}, parseCgroupMounts(""))
}

func TestParseProcCgroup(t *testing.T) {
	require.Equal(t, map[string]string{"name=systemd": "/", "pids": "/", "memory": "/process_api/c5bc", "cpu": "/", "": "/"},
		parseProcCgroup(hybridProcCgroup))
	require.Equal(t, map[string]string{"cpu": "/a", "cpuacct": "/a", "": "/x:y"}, parseProcCgroup("2:cpu,cpuacct:/a\n0::/x:y\nbad\n"))
}

func TestCgroupCandidates(t *testing.T) {
	const name = "jobmaster-e1-00000000"
	v2 := &cgroupMount{Point: "/sys/fs/cgroup", Root: "/"}
	v1 := func(cs ...string) map[string]cgroupMount {
		m := make(map[string]cgroupMount)
		for _, c := range cs {
			m[c] = cgroupMount{Point: "/sys/fs/cgroup/" + c, Root: "/"}
		}
		return m
	}
	v1Layout := cgroupLayout{Version: cgroupV1, Parents: []cgroupParent{
		{Controller: "memory", Dir: "/sys/fs/cgroup/memory/process_api/c5bc/" + name},
		{Controller: "cpu", Dir: "/sys/fs/cgroup/cpu/" + name},
		{Controller: "pids", Dir: "/sys/fs/cgroup/pids/" + name}}}
	for _, tc := range []struct {
		name        string
		mounts      cgroupMounts
		own         map[string]string
		controllers string
		want        []cgroupLayout
		why         []string
	}{
		{"hybrid: v1, under its own cgroups", parseCgroupMounts(hybridMountinfo), parseProcCgroup(hybridProcCgroup), "hugetlb\n",
			[]cgroupLayout{v1Layout},
			[]string{"the cgroup v2 hierarchy at /sys/fs/cgroup/unified lacks the cpu, memory, pids controller(s)"}},
		{"v2 with every controller, then nothing else", cgroupMounts{V2: v2}, map[string]string{"": "/user.slice"}, "cpuset cpu io memory hugetlb pids rdma\n",
			[]cgroupLayout{{Version: cgroupV2, Parents: []cgroupParent{{Dir: "/sys/fs/cgroup/" + name}}}},
			[]string{"no cgroup v1 memory controller mounted"}},
		{"v2 and v1 both usable: v2 first", cgroupMounts{V2: v2, V1: v1("memory", "cpu", "pids")}, nil, "cpu memory pids",
			[]cgroupLayout{{Version: cgroupV2, Parents: []cgroupParent{{Dir: "/sys/fs/cgroup/" + name}}},
				{Version: cgroupV1, Parents: []cgroupParent{{"memory", "/sys/fs/cgroup/memory/" + name}, {"cpu", "/sys/fs/cgroup/cpu/" + name}, {"pids", "/sys/fs/cgroup/pids/" + name}}}},
			nil},
		{"v1 without cpu and pids: they are unenforced", cgroupMounts{V1: v1("memory")}, nil, "",
			[]cgroupLayout{{Version: cgroupV1, Parents: []cgroupParent{{"memory", "/sys/fs/cgroup/memory/" + name}}, Unenforced: []string{"cpu_millis", "pids"}}},
			[]string{"no cgroup v2 hierarchy"}},
		{"v1 without memory: none", cgroupMounts{V1: v1("cpu", "pids")}, nil, "",
			nil, []string{"no cgroup v2 hierarchy", "no cgroup v1 memory controller mounted"}},
		{"a container's view: the mount shows its own cgroup", cgroupMounts{V1: map[string]cgroupMount{"memory": {Point: "/sys/fs/cgroup/memory", Root: "/docker/abc"}}},
			map[string]string{"memory": "/docker/abc/sub"}, "",
			[]cgroupLayout{{Version: cgroupV1, Parents: []cgroupParent{{"memory", "/sys/fs/cgroup/memory/sub/" + name}}, Unenforced: []string{"cpu_millis", "pids"}}},
			[]string{"no cgroup v2 hierarchy"}},
		{"a mount that does not show its own cgroup: unusable", cgroupMounts{V1: map[string]cgroupMount{"memory": {Point: "/sys/fs/cgroup/memory", Root: "/docker/abc"}}},
			map[string]string{"memory": "/docker/abcd"}, "",
			nil, []string{"no cgroup v2 hierarchy", "no cgroup v1 memory controller mounted"}},
		{"nothing at all", cgroupMounts{}, nil, "", nil, []string{"no cgroup v2 hierarchy", "no cgroup v1 memory controller mounted"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, why := cgroupCandidates(tc.mounts, tc.own, tc.controllers, name)
			require.Equal(t, tc.want, got)
			require.Equal(t, tc.why, why)
		})
	}
}

func TestCgroupLimits(t *testing.T) {
	v2 := cgroupLayout{Version: cgroupV2, Parents: []cgroupParent{{Dir: "/p"}}}
	v1 := cgroupLayout{Version: cgroupV1, Parents: []cgroupParent{{"memory", "/m"}, {"cpu", "/c"}, {"pids", "/p"}}}
	v1MemOnly := cgroupLayout{Version: cgroupV1, Parents: []cgroupParent{{"memory", "/m"}}}
	both := wire.Resources{CPUMillis: 500, MemoryMB: 64}
	for _, tc := range []struct {
		name    string
		layout  cgroupLayout
		caps    cgroupCaps
		res     wire.Resources
		pidsMax int64
		want    []cgroupFile
	}{
		{"v2, all of it", v2, cgroupCaps{Swap: true}, both, 4096, []cgroupFile{
			{"", "memory.max", "67108864"}, {"", "memory.swap.max", "0"}, {"", "cpu.max", "50000 100000"}, {"", "pids.max", "4096"}}},
		{"v2 without swap accounting", v2, cgroupCaps{}, wire.Resources{MemoryMB: 1}, 0, []cgroupFile{{"", "memory.max", "1048576"}}},
		{"v1 with memsw: no swap either", v1, cgroupCaps{Memsw: true}, both, 10, []cgroupFile{
			{"memory", "memory.limit_in_bytes", "67108864"}, {"memory", "memory.memsw.limit_in_bytes", "67108864"},
			{"cpu", "cpu.cfs_period_us", "100000"}, {"cpu", "cpu.cfs_quota_us", "50000"}, {"pids", "pids.max", "10"}}},
		{"v1 without memsw", v1, cgroupCaps{}, wire.Resources{MemoryMB: 2}, 0, []cgroupFile{{"memory", "memory.limit_in_bytes", "2097152"}}},
		{"v1 with memory only: cpu and pids are not limited", v1MemOnly, cgroupCaps{}, both, 4096, []cgroupFile{{"memory", "memory.limit_in_bytes", "67108864"}}},
		{"nothing declared: only the pids bound", v2, cgroupCaps{Swap: true}, wire.Resources{}, 4096, []cgroupFile{{"", "pids.max", "4096"}}},
		{"nothing declared, no pids bound: nothing", v1, cgroupCaps{Memsw: true}, wire.Resources{}, -1, nil},
		{"a tiny CPU share gets the kernel's smallest quota", v2, cgroupCaps{}, wire.Resources{CPUMillis: 1}, 0, []cgroupFile{{"", "cpu.max", "1000 100000"}}},
		{"many cores", v1, cgroupCaps{}, wire.Resources{CPUMillis: 2500}, 0, []cgroupFile{{"cpu", "cpu.cfs_period_us", "100000"}, {"cpu", "cpu.cfs_quota_us", "250000"}}},
		{"none: nothing", cgroupLayout{}, cgroupCaps{}, both, 4096, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			require.Equal(t, tc.want, cgroupLimits(tc.layout, tc.caps, tc.res, tc.pidsMax))
		})
	}
}

func TestParseOOMKills(t *testing.T) {
	for _, tc := range []struct {
		name, in string
		n        int64
		ok       bool
	}{
		{"v2 memory.events", "low 0\nhigh 0\nmax 12\noom 1\noom_kill 1\noom_group_kill 0\n", 1, true},
		{"v1 memory.oom_control", "oom_kill_disable 0\nunder_oom 0\noom_kill 3\n", 3, true},
		{"never killed", "oom_kill_disable 0\nunder_oom 0\noom_kill 0\n", 0, true},
		{"no counter (an old kernel)", "oom_kill_disable 0\nunder_oom 0\n", 0, false},
		{"garbage", "oom_kill x\n", 0, false},
		{"negative", "oom_kill -1\n", -1, false},
		{"empty", "", 0, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n, ok := parseOOMKills(tc.in)
			require.Equal(t, tc.ok, ok)
			if ok {
				require.Equal(t, tc.n, n)
			}
		})
	}
}

func TestOOMVerdict(t *testing.T) {
	for _, tc := range []struct {
		name     string
		code     int
		kills    int64
		memoryMB int64
		want     string
	}{
		{"killed by the OOM killer", 137, 1, 64, "out of memory: exceeded its memory_mb of 64 (the OOM killer killed 1 of its processes; exit status 137)"},
		{"a shell that reported its child's kill", 1, 2, 8, "out of memory: exceeded its memory_mb of 8 (the OOM killer killed 2 of its processes; exit status 1)"},
		{"no declared memory, killed all the same", 137, 1, 0, "out of memory: the OOM killer killed 1 of its processes (exit status 137)"},
		{"handled the kill and succeeded", 0, 1, 64, ""},
		{"failed, but not for memory", 137, 0, 64, ""},
		{"finished", 0, 0, 64, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			require.Equal(t, tc.want, oomVerdict(tc.code, tc.kills, tc.memoryMB))
		})
	}
}

func TestCgroupNames(t *testing.T) {
	a, b := cgroupName("e1", "/data/a"), cgroupName("e1", "/data/b")
	require.NotEqual(t, a, b, "two executors with one node id on one host")
	require.True(t, strings.HasPrefix(a, "jobmaster-e1-"), a)
	require.Equal(t, a, cgroupName("e1", "/data/a"), "the next start finds what a crashed run left")
	require.True(t, strings.HasPrefix(cgroupName("a/b c", "/d"), "jobmaster-a_b_c-"))
	require.Len(t, cgroupName(strings.Repeat("n", 300), "/d"), len("jobmaster-")+64+1+8)

	require.Equal(t, "job:v:0:1", cgroupChild("job/v/0/1"))
	long := strings.Repeat("j", 200) + "/v/0/0"
	require.Regexp(t, `^x-[0-9a-f]{32}$`, cgroupChild(long))
	require.NotEqual(t, cgroupChild(long), cgroupChild(strings.Repeat("j", 200)+"/v/0/1"))
}
