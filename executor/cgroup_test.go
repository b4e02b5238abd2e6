package executor

import (
	"strings"
	"testing"
)

func TestCgroupSupport(t *testing.T) {
	if ok, why := cgroupSupport(false, ""); ok || !strings.Contains(why, "no cgroup v2 hierarchy") {
		t.Fatalf("missing hierarchy: %v %q", ok, why)
	}
	if ok, why := cgroupSupport(true, "hugetlb\n"); ok || !strings.Contains(why, "lacks the cpu, memory, pids controller(s)") {
		t.Fatalf("hugetlb only: %v %q", ok, why)
	}
	if ok, why := cgroupSupport(true, "cpuset cpu io memory hugetlb pids rdma\n"); !ok || why != "" {
		t.Fatalf("full: %v %q", ok, why)
	}
}
