// Package freeport hands out loopback ports for tests and benchmarks that
// must name an address before anything listens on it: a master advertises its
// Raft address to its peers, gossip binds TCP and UDP on one port, and a
// restarted node must come back on the address it had.
//
// Asking the kernel for port 0 and closing the listener is not enough. That
// port comes from the ephemeral range, and between the close and the real
// bind any outgoing connection on the machine (another test package's HTTP
// client, a Raft peer) may take it as its local port; "bind: address already
// in use" follows. So ports here come from outside the ephemeral range, in
// blocks: a process owns a block by holding a listener on the block's first
// port for as long as it lives, so two processes that use this package never
// hand out the same port, and within a process no port is handed out twice.
package freeport

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
)

const (
	blockSize = 128
	// lowest is the first port considered: below it live well-known
	// services and many fixed development ports.
	lowest = 10000
)

var (
	mu    sync.Mutex
	held  []net.Listener // the block locks, held until the process exits
	next  int            // the next port to try in the current block
	limit int            // the end of the current block (exclusive)
	span  [2]int         // the usable range [lo, hi), computed once
)

// Get returns "127.0.0.1:port" for a port that is free for TCP and UDP and
// that no other caller of Get, in this process or another, will receive.
func Get() (string, error) {
	mu.Lock()
	defer mu.Unlock()
	if span == [2]int{} {
		span = usableRange()
	}
	if span[1]-span[0] < blockSize {
		return kernelPort()
	}
	for {
		for next < limit {
			p := next
			next++
			if free(p) {
				return addr(p), nil
			}
		}
		if err := takeBlock(); err != nil {
			return "", err
		}
	}
}

// Run returns the first of n consecutive ports, each free for TCP and UDP,
// that no other caller receives; n may be at most the block size less one.
// It is for programs that derive their ports from a base.
func Run(n int) (int, error) {
	mu.Lock()
	defer mu.Unlock()
	if n < 1 || n >= blockSize {
		return 0, fmt.Errorf("freeport: a run of %d ports does not fit a block of %d", n, blockSize)
	}
	if span == [2]int{} {
		span = usableRange()
	}
	if span[1]-span[0] < blockSize {
		return 0, errors.New("freeport: the ephemeral range leaves no room for a run of ports")
	}
	for {
		for next+n <= limit {
			first, ok := next, true
			for p := first; p < first+n && ok; p++ {
				if !free(p) {
					ok = false
					next = p + 1
				}
			}
			if ok {
				next = first + n
				return first, nil
			}
		}
		if err := takeBlock(); err != nil {
			return 0, err
		}
	}
}

// Must is Get for tests: it fails the test instead of returning an error.
func Must(t interface {
	Helper()
	Fatalf(string, ...any)
}) string {
	t.Helper()
	a, err := Get()
	if err != nil {
		t.Fatalf("freeport: %v", err)
	}
	return a
}

// firstBlock picks the block to try first; tests replace it.
var firstBlock = func(n int) int { return rand.IntN(n) }

// takeBlock claims a block nobody holds, starting from a random one so that
// processes started together do not all probe the same blocks first.
func takeBlock() error {
	n := (span[1] - span[0]) / blockSize
	start := firstBlock(n)
	for i := 0; i < n; i++ {
		base := span[0] + ((start+i)%n)*blockSize
		l, err := net.Listen("tcp", addr(base))
		if err != nil {
			continue // another process holds it, or something else uses the port
		}
		held = append(held, l)
		next, limit = base+1, base+blockSize
		return nil
	}
	return errors.New("every port block is held by another process")
}

// free reports whether nothing listens on p over TCP or UDP.
func free(p int) bool {
	l, err := net.Listen("tcp", addr(p))
	if err != nil {
		return false
	}
	pc, err := net.ListenPacket("udp", addr(p))
	l.Close()
	if err != nil {
		return false
	}
	pc.Close()
	return true
}

// usableRange is the stretch of ports below the kernel's ephemeral range,
// or above it when below is too small. On a system that does not say, it
// assumes Linux's default range, 32768-60999.
func usableRange() [2]int {
	lo, hi := 32768, 60999
	if b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range"); err == nil {
		if f := strings.Fields(string(b)); len(f) == 2 {
			l, err1 := strconv.Atoi(f[0])
			h, err2 := strconv.Atoi(f[1])
			if err1 == nil && err2 == nil && l <= h {
				lo, hi = l, h
			}
		}
	}
	if lo-lowest >= 16*blockSize {
		return [2]int{lowest, lo}
	}
	if 65536-(hi+1) >= 16*blockSize {
		return [2]int{hi + 1, 65536}
	}
	return [2]int{0, 0}
}

// kernelPort is the fallback when the ephemeral range leaves no room: the
// kernel's choice, free a moment ago.
func kernelPort() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", fmt.Errorf("freeport: %w", err)
	}
	defer l.Close()
	return l.Addr().String(), nil
}

func addr(p int) string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(p)) }
