package executor

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"time"

	"jobmaster/executor/partition"
	"jobmaster/internal/dirlock"
	"jobmaster/internal/privatedir"
	"jobmaster/membership"
	"jobmaster/metrics"
	"jobmaster/pki"
	"jobmaster/transport"
	"jobmaster/wire"
)

// phase is where an executor is in its life.
type phase int

const (
	phaseNew     phase = iota // built, not started
	phaseRunning              // serving leader requests
	phaseClosing              // Shutdown in progress: leader requests get 503
	phaseStopped              // shut down or crashed
)

// Executor is an executor node. Build it with New, then Start it.
type Executor struct {
	cfg Config
	log *slog.Logger
	// diskFullSaid is the disk-full state last logged (diskFullNow,
	// under diskMu).
	diskMu       sync.Mutex
	diskFullSaid bool
	instance     string

	lifeMu sync.Mutex // serializes Start, Shutdown and Crash

	// mu guards the fields below it: the executor's decisions are taken,
	// and its held set changed, only under mu.
	mu         sync.Mutex
	phase      phase
	held       *heldSet
	fence      fence  // the cluster served and the newest token seen
	persisted  fence  // the fencing state stored on disk
	leaderAddr string // the newest leader's HTTP address: the push target
	// leaderBinary: that leader asked for its heartbeats' answers in
	// binary, and so takes pushes in binary too (wire.AcceptReport); reset
	// by a new leader or term, and by a push it refused (415).
	leaderBinary bool
	lease        lease
	pending      map[string]struct{} // executions changed since the last push
	// answering counts, per execution, the deploy requests being handled
	// that will answer its state: a change it makes meanwhile is in that
	// answer and needs no push.
	answering map[string]int
	settled   chan struct{} // closed and replaced when an execution ends
	// leaseInPlace: the last lease file write was in place (disk full).
	leaseInPlace bool
	// storageErr holds, per file of the executor's own (storage.go), the
	// error of its last write if that failed.
	storageErr map[string]string

	// The data plane (dataplane.go): the executions with outputs or
	// inputs, those whose end tidy is to carry out, and the partitions kept
	// since the last push.
	data     map[string]*dataTask
	ended    []endedTask
	newParts map[string]struct{}

	store    *partition.Store
	fetcher  *partition.Fetcher
	fetchCl  *http.Client
	tidyKick chan struct{}   // wakes tidy
	dataCtx  context.Context // ends every stream (Crash, the end of Shutdown)
	dataStop context.CancelFunc
	dataWG   sync.WaitGroup // every data-plane goroutine

	rt         runtime
	kick       chan struct{}  // wakes the pusher
	quit       chan struct{}  // stops the lease loop and the pusher
	loops      sync.WaitGroup // the lease loop and the pusher
	served     chan struct{}  // closed when the HTTP server has stopped
	ln         net.Listener
	srv        *http.Server
	gossip     *membership.Node
	client     *http.Client
	tls        *transport.TLS // nil: TLS off (tls.go)
	gossipKeys [][]byte
	pushCtx    context.Context
	pushCancel context.CancelFunc
	// metrics is what GET /v1/metrics serves (metrics.go).
	metrics *executorMetrics

	// dirMu: the collector deletes an execution directory (checking it is
	// not held again) and its empty parents only while no task start is
	// creating them (gcloop.go). Taken before mu, never inside it.
	dirMu sync.Mutex
	// gcMu guards execBytes: the space of the execution directories at
	// the last collection.
	gcMu      sync.Mutex
	execBytes int64
	// dirLock keeps another executor out of the data directory until
	// Shutdown.
	dirLock *dirlock.Lock
}

// New validates cfg, creates the data directory and loads the persisted
// fencing token. It starts nothing.
func New(cfg Config) (*Executor, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	// Refused where it listens: before it touches the disk.
	tl, gossipKeys, err := loadSecurity(&cfg)
	if err != nil {
		return nil, err
	}
	if err := dirlock.CheckRole(cfg.DataDir, "executor"); err != nil {
		return nil, fmt.Errorf("--data-dir: %w", err)
	}
	if was, err := privatedir.Ensure(cfg.DataDir); err != nil {
		return nil, fmt.Errorf("data dir: %w", err)
	} else if was != 0 {
		cfg.Logger.Warn("data directory made private: it holds the tasks' directories, logs and partitions", "executor", cfg.NodeID, "dir", cfg.DataDir, "was", was.String(), "now", "drwx------")
	}
	// Before anything in it is read or swept: another executor's.
	lock, err := dirlock.Acquire(cfg.DataDir, "executor")
	if err != nil {
		return nil, err
	}
	made := false
	defer func() {
		if !made {
			lock.Release()
		}
	}()
	fc, err := loadFence(cfg.DataDir)
	if err != nil {
		return nil, err
	}
	store, err := partition.Open(filepath.Join(cfg.DataDir, partitionsDir), cfg.Logger.With("node", cfg.NodeID))
	if err != nil {
		return nil, err
	}
	sweepExecutions(cfg.DataDir, cfg.Logger.With("node", cfg.NodeID))
	if _, err := os.Stat(filepath.Join(cfg.DataDir, tokenFile)); errors.Is(err, fs.ErrNotExist) {
		// A token file from the start gives a full disk one to overwrite
		// in place (inplace.go).
		_ = saveFence(cfg.DataDir, fc)
	}
	// Before gossip starts, so that memberlist's first metrics count.
	if _, err := metrics.RouteLibraries(); err != nil {
		cfg.Logger.Warn("memberlist's metrics are not exported", "err", err)
	}
	var b [8]byte
	if _, err := rand.Read(b[:]); err != nil {
		return nil, fmt.Errorf("instance id: %w", err)
	}
	made = true
	e := &Executor{
		cfg:       cfg,
		dirLock:   lock,
		log:       cfg.Logger.With("node", cfg.NodeID),
		instance:  hex.EncodeToString(b[:]),
		held:      newHeldSet(),
		fence:     fc,
		persisted: fc,
		lease:     lease{dur: cfg.fenceAfter()},
		pending:   make(map[string]struct{}),
		answering: make(map[string]int),
		settled:   make(chan struct{}),
		data:      make(map[string]*dataTask),
		newParts:  make(map[string]struct{}),
		store:     store,
		tidyKick:  make(chan struct{}, 1),
		kick:      make(chan struct{}, 1),
		quit:      make(chan struct{}),
		served:    make(chan struct{}),
		// Pushes honour HTTP_PROXY and NO_PROXY, as the client does.
		client: transport.NewClient(transport.ClientOptions{Timeout: pushTimeout, MaxIdleConnsPerHost: 2, EnvironmentProxy: true,
			TLS: tl, PeerCheck: transport.NodePeer}),
		tls:        tl,
		gossipKeys: gossipKeys,
	}
	e.pushCtx, e.pushCancel = context.WithCancel(context.Background())
	e.dataCtx, e.dataStop = context.WithCancel(context.Background())
	// Fetches go straight to the executors that hold the bytes (no proxy)
	// and have no overall timeout: a stream lasts as long as its producer.
	e.fetchCl = transport.NewClient(transport.ClientOptions{DialTimeout: fetchDialTimeout, MaxIdleConnsPerHost: 16,
		TLS: tl, PeerCheck: transport.ExecutorOnly})
	e.metrics = newExecutorMetrics(e)
	if tl != nil {
		metrics.RegisterCertExpiry(e.metrics.reg, tl.NotAfter, cfg.Now)
	}
	e.fetcher = &partition.Fetcher{Client: e.fetchCl, Bound: cfg.FetchTimeout, Fence: e.newestFence, Log: e.log, Observe: e.metrics.fetched}
	return e, nil
}

// fetchDialTimeout bounds connecting to the executor that holds an input.
const fetchDialTimeout = 5 * time.Second

// newestFence is the fence this executor's fetches carry.
func (e *Executor) newestFence() (string, uint64) {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.fence.Cluster, e.fence.Token
}

// Instance is the random id of this executor process's life, carried in
// every report.
func (e *Executor) Instance() string { return e.instance }

// Start serves HTTP, joins gossip and starts the lease loop and the pusher.
func (e *Executor) Start() error {
	e.lifeMu.Lock()
	defer e.lifeMu.Unlock()
	e.mu.Lock()
	p := e.phase
	e.mu.Unlock()
	if p != phaseNew {
		return errors.New("executor: Start called twice")
	}
	ln, err := net.Listen("tcp", e.cfg.HTTPAddr)
	if err != nil {
		return fmt.Errorf("executor http: %w", err)
	}
	if e.cfg.GossipAddr != "" {
		e.gossip, err = membership.Start(membership.Config{
			NodeID:   e.cfg.NodeID,
			BindAddr: e.cfg.GossipAddr,
			Join:     e.cfg.Join,
			Logger:   e.log.With("component", "gossip"),
			Now:      e.cfg.Now,
			Slow:     e.cfg.SlowGossip,
			Keys:     e.gossipKeys,
			Meta: membership.Meta{
				Role:     membership.RoleExecutor,
				HTTPAddr: advertiseAddr(ln.Addr().String(), e.cfg.GossipAddr),
				Slots:    e.cfg.Slots,
				Version:  wire.Version,
			},
		})
		if err != nil {
			ln.Close()
			return fmt.Errorf("executor gossip: %w", err)
		}
	}
	e.ln = ln
	if e.cfg.Runtime == RuntimeSim {
		e.rt = newSimRuntime(e.cfg.Now, e.onExit)
	} else {
		e.rt = newExecRuntime(e.cfg, e.onExit, &e.dirMu)
	}
	e.srv = transport.NewServer(e.routes(), transport.ServerOptions{IdleTimeout: time.Minute, Logger: e.log, TLS: e.tls,
		MaxConnsPerClient: e.cfg.MaxConnsPerClient})
	e.mu.Lock()
	e.phase = phaseRunning
	e.lease.begin(e.cfg.Now())
	e.writeLeaseFileLocked()
	e.mu.Unlock()
	e.loops.Add(4)
	if e.tls != nil {
		e.loops.Add(1)
		go func() {
			defer e.loops.Done()
			pki.WatchExpiry(e.tls.NotAfter, e.cfg.Now, time.Hour, e.quit, func(msg string, expired bool) {
				if expired {
					e.log.Error(msg)
				} else {
					e.log.Warn(msg)
				}
			})
		}()
	}
	go func() {
		defer close(e.served)
		if err := transport.Serve(e.srv, ln); err != nil {
			e.log.Error("http server", "err", err)
		}
	}()
	go e.leaseLoop()
	go e.pushLoop()
	go e.tidyLoop()
	go e.gcLoop()
	e.mu.Lock()
	fc := e.fence // a heartbeat may already be changing it
	e.mu.Unlock()
	e.log.Info("executor started", "http", e.Addr(), "gossip", e.cfg.GossipAddr, "slots", e.cfg.Slots,
		"runtime", e.cfg.Runtime, "lease", e.cfg.Lease, "token", fc.Token, "cluster", fc.Cluster, "instance", e.instance,
		"tls", e.tls != nil, "gossip_encrypted", len(e.gossipKeys) > 0, "cpu_millis", e.cfg.CPUMillis, "memory_mb", e.cfg.MemoryMB)
	if rt, ok := e.rt.(*execRuntime); ok {
		rt.cg.logMode(e.cfg.CPUMillis, e.cfg.MemoryMB)
	}
	return nil
}

// advertiseAddr is the HTTP address to gossip: the listener's, with the
// gossip host in place of an unspecified host (0.0.0.0, ::), or else the
// host's own address (membership.Advertise).
func advertiseAddr(listen, gossip string) string {
	host, port, err := net.SplitHostPort(listen)
	if err != nil {
		return listen
	}
	if ip := net.ParseIP(host); ip == nil || !ip.IsUnspecified() {
		return listen
	}
	if ghost, _, err := net.SplitHostPort(gossip); err == nil && ghost != "" {
		if ip := net.ParseIP(ghost); ip == nil || !ip.IsUnspecified() {
			return net.JoinHostPort(ghost, port)
		}
	}
	if adv, err := membership.Advertise(listen); err == nil {
		return adv
	}
	return net.JoinHostPort("127.0.0.1", port)
}

// Addr is the HTTP address the executor listens on (empty before Start).
func (e *Executor) Addr() string {
	if e.ln == nil {
		return ""
	}
	return e.ln.Addr().String()
}

// Shutdown stops every task (they end CANCELED and their processes are dead
// when it returns), pushes their final states to the leader, leaves gossip,
// and stops serving. If ctx ends first, the remaining tasks are killed at
// once; Shutdown still returns only when they are dead, with ctx's error.
func (e *Executor) Shutdown(ctx context.Context) error {
	e.lifeMu.Lock()
	defer e.lifeMu.Unlock()
	e.mu.Lock()
	if e.phase != phaseRunning {
		if e.phase == phaseNew {
			e.phase = phaseStopped
			e.dirLock.Release()
		}
		e.mu.Unlock()
		return nil
	}
	e.phase = phaseClosing
	e.mu.Unlock()
	e.log.Info("executor shutting down: stopping every task")

	var errs []error
	e.stopTasks(e.cancelAll("executor shutting down"))
	if err := e.waitTasks(ctx); err != nil {
		errs = append(errs, err)
		e.mu.Lock()
		live := e.held.live()
		e.mu.Unlock()
		for _, id := range live {
			e.rt.kill(id)
		}
		_ = e.waitTasks(context.Background())
	}
	close(e.quit)
	e.loops.Wait()
	if ctx.Err() == nil {
		// The last word is everything still held: a state only a deploy
		// answer carried (and that answer may be lost) included, since no
		// heartbeat will ask again.
		e.mu.Lock()
		for _, st := range e.held.list() {
			e.pending[st.ExecutionID] = struct{}{}
		}
		e.mu.Unlock()
		pctx, cancel := context.WithTimeout(ctx, pushTimeout)
		e.pushOnce(pctx)
		cancel()
	}
	e.rt.close()
	e.store.Close() // ends the streams being served, so HTTP can stop
	if e.gossip != nil {
		timeout := time.Second
		if dl, ok := ctx.Deadline(); ok {
			timeout = min(timeout, max(time.Until(dl), 0))
		}
		if err := e.gossip.Leave(timeout); err != nil {
			errs = append(errs, fmt.Errorf("leave gossip: %w", err))
		}
	}
	if err := e.srv.Shutdown(ctx); err != nil {
		errs = append(errs, fmt.Errorf("stop http: %w", err))
		e.srv.Close()
	}
	<-e.served
	e.pushCancel()
	e.client.CloseIdleConnections()
	e.mu.Lock()
	e.phase = phaseStopped
	e.mu.Unlock()
	e.dataStop()
	e.dataWG.Wait()
	e.fetchCl.CloseIdleConnections()
	e.dirLock.Release()
	e.log.Info("executor stopped")
	return errors.Join(errs...)
}

// Crash simulates the death of the executor process, for tests: HTTP and
// gossip stop at once (nothing is announced or pushed), and every task
// process is killed as the shim would kill it once its executor died. The
// held set is left as it was. A new executor may then be started on the
// same data directory.
func (e *Executor) Crash() {
	e.lifeMu.Lock()
	defer e.lifeMu.Unlock()
	e.mu.Lock()
	p := e.phase
	e.phase = phaseStopped
	e.mu.Unlock()
	if p != phaseRunning {
		e.dirLock.Release() // as the process's end would
		return
	}
	e.log.Warn("executor crashing (test)")
	e.srv.Close()
	if e.gossip != nil {
		_ = e.gossip.Shutdown()
	}
	e.pushCancel()
	close(e.quit)
	e.loops.Wait()
	e.rt.close()
	e.store.Close()
	e.dataStop() // the tasks are dead: their pipes may close
	e.dataWG.Wait()
	e.mu.Lock()
	for _, dt := range e.data { // what tidy would have closed
		for _, sp := range dt.spools {
			_ = sp.Close()
		}
	}
	e.mu.Unlock()
	<-e.served
	e.client.CloseIdleConnections()
	e.fetchCl.CloseIdleConnections()
	e.dirLock.Release() // as the process's end would
}

// waitTasks waits until no execution is live.
func (e *Executor) waitTasks(ctx context.Context) error {
	for {
		e.mu.Lock()
		n := e.held.liveCount()
		ch := e.settled
		e.mu.Unlock()
		if n == 0 {
			return nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return fmt.Errorf("%d tasks still running: %w", n, ctx.Err())
		}
	}
}
