package freeport

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

const childEnv = "FREEPORT_TEST_CHILD"

// TestMain lets the test binary act as a second process that asks for
// ports while the first still holds its blocks.
func TestMain(m *testing.M) {
	if want := os.Getenv(childEnv); want != "" {
		// Start at the parent's block: only its lock keeps us out.
		base, _ := strconv.Atoi(want)
		firstBlock = func(int) int { return (base - usableRange()[0]) / blockSize }
		for i := 0; i < 200; i++ {
			a, err := Get()
			if err != nil {
				fmt.Fprintln(os.Stderr, err)
				os.Exit(1)
			}
			fmt.Println(a)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

func port(t *testing.T, a string) int {
	t.Helper()
	host, p, err := net.SplitHostPort(a)
	require.NoError(t, err)
	require.Equal(t, "127.0.0.1", host)
	n, err := strconv.Atoi(p)
	require.NoError(t, err)
	return n
}

func TestPortsAreDistinctBindableAndOutsideTheEphemeralRange(t *testing.T) {
	r := usableRange()
	require.Greater(t, r[1]-r[0], blockSize, "this machine's ephemeral range leaves room")
	seen := map[int]bool{}
	for i := 0; i < 3*blockSize; i++ { // crosses into new blocks
		a := Must(t)
		p := port(t, a)
		require.False(t, seen[p], "port %d handed out twice", p)
		seen[p] = true
		require.GreaterOrEqual(t, p, r[0])
		require.Less(t, p, r[1])
		l, err := net.Listen("tcp", a)
		require.NoError(t, err, "TCP on %s", a)
		pc, err := net.ListenPacket("udp", a)
		require.NoError(t, err, "UDP on %s", a)
		l.Close()
		pc.Close()
	}
}

func TestAnotherProcessGetsOtherPorts(t *testing.T) {
	mine := map[int]bool{}
	first := 0
	for i := 0; i < 200; i++ {
		p := port(t, Must(t))
		if i == 0 {
			first = p
		}
		mine[p] = true
	}
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	base := first - (first-usableRange()[0])%blockSize
	cmd.Env = append(os.Environ(), fmt.Sprintf("%s=%d", childEnv, base))
	out, err := cmd.Output()
	require.NoError(t, err)
	lines := strings.Fields(string(out))
	require.Len(t, lines, 200)
	for _, a := range lines {
		p := port(t, a)
		require.False(t, mine[p], "port %d was handed to both processes", p)
	}
}

func TestAPortInUseIsSkipped(t *testing.T) {
	mu.Lock()
	if span == [2]int{} {
		span = usableRange()
	}
	if next >= limit {
		require.NoError(t, takeBlock())
	}
	taken := next
	mu.Unlock()
	l, err := net.ListenPacket("udp", addr(taken)) // UDP alone must be enough to skip it
	require.NoError(t, err)
	defer l.Close()
	require.NotEqual(t, taken, port(t, Must(t)))
}

func TestRunIsConsecutiveFreeAndNotSharedWithGet(t *testing.T) {
	a := port(t, Must(t))
	first, err := Run(49)
	require.NoError(t, err)
	for p := first; p < first+49; p++ {
		require.NotEqual(t, a, p)
		l, err := net.Listen("tcp", addr(p))
		require.NoError(t, err)
		l.Close()
	}
	b := port(t, Must(t))
	require.False(t, b >= first && b < first+49, "port %d is inside the run", b)
	_, err = Run(blockSize)
	require.Error(t, err)
}
