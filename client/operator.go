package client

import (
	"context"
	"net/http"
	"net/url"
	"strconv"

	"jobmaster/api"
	"jobmaster/transport"
)

// SnapshotSave downloads the replicated state (GET /v1/operator/snapshot):
// a backup that SnapshotRestore can bring back.
func (c *Client) SnapshotSave(ctx context.Context) ([]byte, error) {
	data, _, err := c.Snapshot(ctx)
	return data, err
}

// Snapshot is SnapshotSave, also returning the applied index the backup
// was taken at (0 if the master did not say).
func (c *Client) Snapshot(ctx context.Context) ([]byte, uint64, error) {
	res, err := c.do(ctx, request{method: http.MethodGet, path: c.readPath("/v1/operator/snapshot"), idempotent: true})
	if err != nil {
		return nil, 0, err
	}
	index, _ := strconv.ParseUint(res.index, 10, 64)
	return res.body, index, nil
}

// SnapshotRestore replaces the cluster's state with a backup (PUT
// /v1/operator/snapshot), and returns what the restored state holds. It
// is not resent once it may have reached a master.
func (c *Client) SnapshotRestore(ctx context.Context, snapshot []byte) (api.SnapshotRestored, error) {
	return c.SnapshotRestoreWith(ctx, snapshot, RestoreOptions{})
}

// RestoreOptions are a restore's options.
type RestoreOptions struct {
	// ResetACL lets a snapshot taken before the ACL bootstrap replace the
	// state of a cluster bootstrapped since (?reset_acl): its ACLs may
	// then be bootstrapped again.
	ResetACL bool
}

// SnapshotRestoreWith is SnapshotRestore with options.
func (c *Client) SnapshotRestoreWith(ctx context.Context, snapshot []byte, o RestoreOptions) (api.SnapshotRestored, error) {
	path := "/v1/operator/snapshot"
	if o.ResetACL {
		path += "?reset_acl=true"
	}
	// Its 503s are final answers, never resent: a refusal before anything
	// happened, or one that says the outcome is unknown (the leader lost
	// its leadership or stopped during Raft's restore) and how to tell; a
	// 502 or 504 is a forward whose answer was lost.
	req := request{method: http.MethodPut, path: path, body: snapshot,
		contentType: transport.BinaryType, unknownOn: []int{http.StatusBadGateway, http.StatusGatewayTimeout}}
	var out api.SnapshotRestored
	res, err := c.do(ctx, req)
	if err != nil {
		return out, err
	}
	return out, decode(req, res, &out)
}

// RaftPeers lists the masters of the Raft configuration.
func (c *Client) RaftPeers(ctx context.Context) ([]api.RaftPeer, error) {
	var out api.RaftPeers
	if err := c.get(ctx, "/v1/operator/raft/peers", &out); err != nil {
		return nil, err
	}
	return out.Peers, nil
}

// RemovePeer removes a master from the Raft configuration (DELETE
// /v1/operator/raft/peers/{id}); a master not in it is an *APIError 404.
func (c *Client) RemovePeer(ctx context.Context, id string) error {
	_, err := c.do(ctx, request{method: http.MethodDelete, path: "/v1/operator/raft/peers/" + url.PathEscape(id), idempotent: true})
	return err
}
