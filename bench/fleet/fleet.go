// Package fleet runs many executors in one process: real executor.Executor
// instances with the sim runtime, each with its own HTTP listener, data
// directory and gossip node joined to the masters, exactly as `jobmaster
// executor --runtime sim` would run them. Only the process is shared. The
// macro benchmarks run a fleet in a child process (Spawn), so that its CPU
// is read apart from the load generator's and it can be stopped at once;
// jmprofile runs one in its own process (Start).
package fleet

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"jobmaster/bench/cluster"
	"jobmaster/executor"
	"jobmaster/membership"
	"jobmaster/transport"
	"jobmaster/wire"
)

// fleetGossip are the gossip timings of a fleet's executors. Hundreds of
// gossip members in one process on a small machine miss the LAN timings'
// 200 ms probe timeout whenever the process is busy; every miss becomes a
// suspicion broadcast to all, which makes the process busier. And every
// join is an alive broadcast that each member retransmits several times,
// a few per 1,400-byte packet: work that a real fleet spreads over its
// hosts, but that kept one process at two cores for minutes after 1,000
// executors joined. Here fewer retransmissions (the master an executor
// joins through tells the others) go out in bigger packets (loopback
// carries 64 KiB datagrams). A thousand fleet executors in four processes
// then still took 1.4 of the machine's two cores, most of it in their own
// failure detection and its echoes: each one's probes of the others
// (whose late answers are suspicions, refuted and broadcast to all), and
// the rejoin of a master it had come to believe dead, every 2 s, each a
// push-pull of the whole member table. So a fleet executor probes the
// others only every 30 s, gossips to two members a second, pulls the
// whole table every 5 minutes and rejoins a master every 30 s at most:
// the masters still probe every executor at the product's rate, and
// notice one that stops answering as they would in production. Executors
// on their own hosts keep the defaults; so do the masters here, so the
// leader's gossip cost is the product's.
var fleetGossip = membership.Timings{
	ProbeInterval:     30 * time.Second,
	ProbeTimeout:      10 * time.Second,
	GossipInterval:    time.Second,
	GossipNodes:       2,
	PushPullInterval:  5 * time.Minute,
	SuspicionMult:     6,
	RetransmitMult:    1,
	UDPBufferSize:     32 << 10,
	ReconnectInterval: 30 * time.Second,
}

// Fleet is a set of running sim executors.
type Fleet struct {
	Executors []*executor.Executor
}

// Start starts n sim executors named <prefix>0001... with slots each, data
// under dir, each joined to one of the gossip addresses in join in turn
// (it learns of the others through gossip): a join is a push-pull of the
// whole member table with each address given, and a thousand executors
// joining through all three masters cost the masters and the fleet three
// times that. It starts perSecond of
// them a second, at most four at a time (a start returns once its gossip
// join has exchanged state with a master): gossip members joining faster
// than the others absorb them flood each other with join broadcasts.
func Start(ctx context.Context, n, slots int, prefix, dir string, join []string, perSecond int) (*Fleet, error) {
	return start(ctx, 0, n, slots, prefix, dir, join, perSecond, nil)
}

// start is Start of the executors numbered first+1 to first+n, that counts
// those started in count (if not nil).
func start(ctx context.Context, first, n, slots int, prefix, dir string, join []string, perSecond int, count *atomic.Int64) (*Fleet, error) {
	f := &Fleet{Executors: make([]*executor.Executor, n)}
	errs := make([]error, n)
	tick := time.NewTicker(time.Second / time.Duration(max(1, perSecond)))
	defer tick.Stop()
	var wg sync.WaitGroup
	inflight := make(chan struct{}, 4)
	for i := 0; i < n; i++ {
		if i > 0 {
			select {
			case <-tick.C:
			case <-ctx.Done():
				wg.Wait()
				f.Close()
				return nil, ctx.Err()
			}
		}
		inflight <- struct{}{}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-inflight }()
			id := fmt.Sprintf("%s%04d", prefix, first+i+1)
			e, err := executor.New(executor.Config{
				NodeID:     id,
				DataDir:    filepath.Join(dir, id),
				HTTPAddr:   "127.0.0.1:0",
				GossipAddr: "127.0.0.1:0",
				Join:       []string{join[(first+i)%len(join)]},
				Slots:      slots,
				Runtime:    executor.RuntimeSim,
				SlowGossip: &fleetGossip,
				Logger:     fleetLogger(),
			})
			if err == nil {
				if err = e.Start(); err != nil {
					_ = e.Shutdown(context.Background()) // gives its data directory back
				}
			}
			if err != nil {
				errs[i] = fmt.Errorf("executor %s: %w", id, err)
				return
			}
			f.Executors[i] = e
			if count != nil {
				count.Add(1)
			}
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			f.Close()
			return nil, err
		}
	}
	return f, nil
}

// fleetLogger is where a fleet's executors log: nowhere, or with
// FLEET_LOG set, to that file ("%p" replaced by the process id) at debug
// level, gossip's own log included (how the fleet's gossip was found to
// churn).
var fleetLogger = sync.OnceValue(func() *slog.Logger {
	file := os.Getenv("FLEET_LOG")
	if file == "" {
		return nil
	}
	f, err := os.OpenFile(strings.ReplaceAll(file, "%p", fmt.Sprint(os.Getpid())), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil
	}
	return slog.New(slog.NewTextHandler(f, &slog.HandlerOptions{Level: slog.LevelDebug}))
})

// Close stops every executor at once, as a crash would: no task is
// stopped gracefully and nothing is announced (the masters are gone by
// then, or about to be).
func (f *Fleet) Close() {
	var wg sync.WaitGroup
	sem := make(chan struct{}, 64)
	for _, e := range f.Executors {
		if e == nil {
			continue
		}
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			e.Crash()
		}()
	}
	wg.Wait()
}

// WaitToken waits until every executor has accepted a request from the
// leader with the given token (it answers heartbeats from it).
func (f *Fleet) WaitToken(ctx context.Context, token uint64) error {
	addrs := make([]string, len(f.Executors))
	for i, e := range f.Executors {
		addrs[i] = e.Addr()
	}
	return WaitHeard(ctx, addrs, token)
}

// heard reports whether the executor at addr has accepted a request with
// token (GET /v1/executions shows the newest token it has seen).
func heard(ctx context.Context, addr string, token uint64) bool {
	var ex wire.Executions
	return cluster.GetJSON(ctx, transport.URL(cluster.HTTP, addr, wire.PathExecutions), &ex) == nil && ex.FencingToken >= token
}
