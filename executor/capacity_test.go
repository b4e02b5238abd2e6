package executor

import (
	"bufio"
	"strings"
	"testing"
)

func TestParseMemTotal(t *testing.T) {
	in := "MemTotal:       16303916 kB\nMemFree:         1234 kB\n"
	if got := parseMemTotal(bufio.NewScanner(strings.NewReader(in))); got != 15921 {
		t.Fatalf("MemTotal = %d MiB, want 15921", got)
	}
	if got := parseMemTotal(bufio.NewScanner(strings.NewReader("MemFree: 1 kB\n"))); got != 0 {
		t.Fatalf("no MemTotal = %d, want 0", got)
	}
	if hostCPUMillis() < 1000 {
		t.Fatalf("host CPU %d millis", hostCPUMillis())
	}
}
