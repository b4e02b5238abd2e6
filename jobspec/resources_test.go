package jobspec

import (
	"strings"
	"testing"
)

func TestResources(t *testing.T) {
	s, err := Parse([]byte(`{"vertices": [{"id": "a", "parallelism": 1, "command": ["x"], "resources": {"cpu_millis": 500, "memory_mb": 256}},
		{"id": "b", "parallelism": 1, "command": ["x"], "resources": {}}]}`))
	if err != nil {
		t.Fatal(err)
	}
	if got := s.Vertices[0].Of(); got != (Resources{CPUMillis: 500, MemoryMB: 256}) {
		t.Fatalf("a: %+v", got)
	}
	if s.Vertices[1].Resources != nil {
		t.Fatalf("an empty declaration was kept: %+v", s.Vertices[1].Resources)
	}
	for spec, want := range map[string]string{
		`{"cpu_millis": -1}`:         "vertices[0].resources.cpu_millis: must be between 0 and 1000000",
		`{"memory_mb": 99999999999}`: "vertices[0].resources.memory_mb: must be between 0 and 16777216",
		`{"memory": 1}`:              "vertices[0].resources.memory: unknown field",
		`{"memory_mb": "1G"}`:        "vertices[0].resources.memory_mb: want",
	} {
		_, err := Parse([]byte(`{"vertices": [{"id": "a", "parallelism": 1, "command": ["x"], "resources": ` + spec + `}]}`))
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("resources %s: error %v, want %q", spec, err, want)
		}
	}
}
