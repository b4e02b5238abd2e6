package executor

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"jobmaster/membership"
	"jobmaster/wire"
)

func TestExecutorJoinsGossip(t *testing.T) {
	t.Parallel()
	masterAddr := freePort(t)
	master, err := membership.Start(membership.Config{NodeID: "m1", BindAddr: masterAddr,
		Meta: membership.Meta{Role: membership.RoleMaster, HTTPAddr: "127.0.0.1:1", Version: wire.Version}})
	require.NoError(t, err)
	t.Cleanup(func() { _ = master.Shutdown() })

	e, err := New(Config{NodeID: "e7", DataDir: t.TempDir(), HTTPAddr: "127.0.0.1:0", GossipAddr: freePort(t),
		Join: []string{masterAddr}, Slots: 6, Runtime: RuntimeSim, Logger: testLogger(t)})
	require.NoError(t, err)
	require.NoError(t, e.Start())

	waitFor(t, "the master to see the executor", func() bool { return len(master.Role(membership.RoleExecutor)) == 1 })
	m := master.Role(membership.RoleExecutor)[0]
	require.Equal(t, "e7", m.ID)
	require.Equal(t, membership.Meta{Role: membership.RoleExecutor, HTTPAddr: e.Addr(), Slots: 6, Version: wire.Version}, m.Meta)

	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	require.NoError(t, e.Shutdown(ctx))
	// Leave announces the departure at once. (membership reports it as
	// "dead": memberlist never fills in the Node.State it reads.)
	waitFor(t, "the executor to have left", func() bool {
		m, _ := master.Get("e7")
		return m.Status == membership.StatusLeft || m.Status == membership.StatusDead
	})
}
