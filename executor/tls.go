package executor

import (
	"errors"
	"fmt"
	"time"

	"jobmaster/exposure"
	"jobmaster/membership"
	"jobmaster/pki"
	"jobmaster/transport"
)

// An executor's security (docs/security.md). With TLS on, its HTTP endpoint
// is HTTPS, and guard (auth.go) admits the commands of masters only and
// partition fetches of executors only; its pushes to masters and its fetches
// from other executors are mutual TLS, and the peer must present a server's
// or an executor's certificate. Gossip is encrypted with its keys.

// loadSecurity loads the executor's TLS (nil when off) and gossip keys,
// after deciding whether it may start with them where it listens (package
// exposure).
func loadSecurity(cfg *Config) (*transport.TLS, [][]byte, error) {
	keys, err := membership.LoadKeys(cfg.GossipKeys, cfg.GossipKeyring)
	if err != nil {
		return nil, nil, err
	}
	v := exposure.Judge(exposure.Node{
		Role:  "executor",
		Addrs: []exposure.Addr{{Flag: "--http-addr", Value: cfg.HTTPAddr}, {Flag: "--gossip-addr", Value: cfg.GossipAddr}},
		TLS:   cfg.TLS.On(), GossipKey: len(keys) > 0, Insecure: cfg.Insecure,
	})
	if err := v.Err(); err != nil {
		return nil, nil, err
	}
	if w := v.Warning(); w != "" {
		cfg.Logger.Warn(w, "executor", cfg.NodeID)
	}
	if !cfg.TLS.On() {
		return nil, keys, nil
	}
	if err := cfg.TLS.CheckNode(); err != nil {
		return nil, nil, err
	}
	tl, err := transport.LoadTLS(cfg.TLS)
	if err != nil {
		return nil, nil, err
	}
	if err := tl.CheckIdentity(pki.Identity{Role: pki.Executor, NodeID: cfg.NodeID}); err != nil {
		return nil, nil, err
	}
	return tl, keys, nil
}

// Reload reads the TLS files and the gossip keyring file (GossipKeyring)
// again, as SIGHUP asks; see master.Master.Reload. What cannot be read is
// left as it was and returned as an error.
func (e *Executor) Reload() error {
	var errs []error
	if e.tls != nil {
		if err := e.tls.Reload(); err != nil {
			errs = append(errs, fmt.Errorf("TLS: %w", err))
			e.log.Error("TLS certificates not reloaded: the ones in use are kept", "err", err)
		} else {
			e.log.Info("TLS certificates reloaded", "expires", e.tls.NotAfter().UTC().Format(time.RFC3339))
		}
	}
	if e.cfg.GossipKeyring != "" && e.gossip != nil {
		c, err := e.gossip.ReloadKeyring(e.cfg.GossipKeyring)
		if err != nil {
			errs = append(errs, fmt.Errorf("gossip keyring: %w", err))
			e.log.Error("gossip keyring not reloaded: the keys in use are kept", "err", err)
		} else {
			e.log.Info("gossip keyring reloaded", "installed", len(c.Install), "primary_changed", c.Use != nil, "removed", len(c.Remove))
		}
	}
	return errors.Join(errs...)
}
