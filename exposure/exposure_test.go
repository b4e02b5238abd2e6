package exposure

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestLoopback(t *testing.T) {
	for addr, want := range map[string]bool{
		"127.0.0.1:7401": true, "127.1.2.3:1": true, "[::1]:7401": true, "localhost:7401": true, "LOCALHOST:1": true,
		"0.0.0.0:7401": false, "[::]:7401": false, ":7401": false, "10.0.0.1:7401": false, "m1.example:7401": false,
		"[::ffff:127.0.0.1]:1": true, "garbage": false,
	} {
		assert.Equal(t, want, Loopback(addr), addr)
	}
}

func master(http, raft, gossip string) Node {
	return Node{Role: "master", NeedsACL: true,
		Addrs: []Addr{{"--http-addr", http}, {"--raft-addr", raft}, {"--gossip-addr", gossip}}}
}

func TestJudge(t *testing.T) {
	lo := master("127.0.0.1:7401", "127.0.0.1:7411", "127.0.0.1:7421")
	assert.Nil(t, Judge(lo).Err(), "loopback may run insecure")
	assert.False(t, Judge(lo).Warn())

	open := master("10.0.0.1:7401", "127.0.0.1:7411", "0.0.0.0:7421")
	v := Judge(open)
	assert.True(t, v.Refuse())
	assert.Equal(t, []string{"--http-addr 10.0.0.1:7401", "--gossip-addr 0.0.0.0:7421"}, v.Exposed)
	err := v.Err()
	assert.ErrorContains(t, err, "--insecure")
	assert.ErrorContains(t, err, "TLS (--tls-ca, --tls-cert, --tls-key), a gossip key (--gossip-key or --gossip-keyring) and ACLs (--acl)")
	assert.ErrorContains(t, err, "--http-addr 10.0.0.1:7401, --gossip-addr 0.0.0.0:7421")

	open.TLS, open.GossipKey = true, true
	assert.EqualError(t, Judge(open).Err(), "this master listens beyond loopback (--http-addr 10.0.0.1:7401, --gossip-addr 0.0.0.0:7421) without ACLs (--acl): anyone who reaches these ports could run commands on the executors. Turn them on (docs/security.md), or start with --insecure to run without them")
	open.ACL = true
	assert.Nil(t, Judge(open).Err(), "every protection on")
	assert.False(t, Judge(open).Warn())

	exec := Node{Role: "executor", Addrs: []Addr{{"--http-addr", "0.0.0.0:7431"}, {"--gossip-addr", ""}}, TLS: true, GossipKey: true}
	assert.Nil(t, Judge(exec).Err(), "an executor has no ACLs to turn on")
	exec.GossipKey = false
	assert.ErrorContains(t, Judge(exec).Err(), "without a gossip key (--gossip-key or --gossip-keyring):")

	exec.Insecure = true
	v = Judge(exec)
	assert.Nil(t, v.Err(), "--insecure starts it")
	assert.True(t, v.Warn())
	assert.Contains(t, v.Warning(), "--http-addr 0.0.0.0:7431")
	assert.Contains(t, v.Warning(), "without a gossip key")
	lo.Insecure = true
	assert.False(t, Judge(lo).Warn(), "nothing to warn about on loopback")
	assert.Empty(t, Judge(lo).Warning())
}

// An address that is not host:port is said as such, before any question
// of exposure, with or without the protections or --insecure.
func TestJudgeSaysAMalformedAddress(t *testing.T) {
	n := master("nohost", "127.0.0.1:7411", "127.0.0.1:7421")
	assert.EqualError(t, Judge(n).Err(), `--http-addr "nohost" is not host:port (missing port in address)`)
	n.Insecure, n.TLS, n.GossipKey, n.ACL = true, true, true, true
	assert.True(t, Judge(n).Refuse(), "no protection makes it listenable")
	assert.False(t, Judge(n).Warn())
}
