package integration

import (
	"crypto/rand"
	"encoding/hex"
	"strings"
	"testing"
	"time"

	"jobmaster/api"
	"jobmaster/client"
)

// randomHex is 16 random bytes in hex.
func randomHex(t testing.TB) string {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b[:])
}

// masterAddrs is the masters' HTTP addresses, comma-separated.
func (c *Cluster) masterAddrs() string {
	var a []string
	for _, m := range c.Masters {
		a = append(a, m.HTTPAddr)
	}
	return strings.Join(a, ",")
}

// ClientWith is a client of the cluster's masters, as the harness's own
// (TLS with its client certificate when the cluster has TLS), that sends
// the token secret (none when "").
func (c *Cluster) ClientWith(secret string) *client.Client {
	c.t.Helper()
	opts := append([]client.Option{client.WithTimeout(20 * time.Second)}, c.clientOpts...)
	if secret != "" {
		opts = append(opts, client.WithToken(secret))
	}
	cl, err := client.New(c.masterAddrs(), opts...)
	if err != nil {
		c.t.Fatal(err)
	}
	c.t.Cleanup(cl.Close)
	return cl
}

// bootstrapACL bootstraps the ACLs with the management token's secret
// (Options.ACL), once a leader answers: with its secret named, the
// bootstrap may be repeated until one does.
func (c *Cluster) bootstrapACL() {
	c.t.Helper()
	var lastErr error
	WaitFor(c.t, "the ACL bootstrap", 30*time.Second, func() bool {
		_, lastErr = c.Client.BootstrapACL(c.ctx(), c.ManagementToken)
		return lastErr == nil
	})
}

// Token creates a token of the policy (read, submit or management) with
// the management token and returns its secret.
func (c *Cluster) Token(policy, name string) string {
	c.t.Helper()
	tok, err := c.Client.CreateToken(c.ctx(), api.ACLTokenRequest{Name: name, Policy: policy})
	if err != nil {
		c.t.Fatalf("create a %s token: %v", policy, err)
	}
	return tok.SecretID
}
