package client

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"jobmaster/api"
)

// The token goes with every request to the masters; the bodies of the ACL
// calls are what the API takes.
func TestTokenAndACLCalls(t *testing.T) {
	var gotToken, gotType, gotBody []string
	s := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		gotToken = append(gotToken, r.Header.Get("X-Jobmaster-Token"))
		gotType = append(gotType, r.Header.Get("Content-Type"))
		gotBody = append(gotBody, string(b))
		switch r.Method + " " + r.URL.Path {
		case "POST /v1/acl/bootstrap", "POST /v1/acl/tokens":
			var req api.ACLTokenRequest
			_ = json.Unmarshal(b, &req)
			writeJSON(w, http.StatusCreated, api.ACLToken{AccessorID: "acc", SecretID: "s3cret-" + req.Policy, Name: req.Name, Policy: req.Policy})
		case "GET /v1/acl/tokens":
			writeJSON(w, http.StatusOK, api.ACLTokenList{Tokens: []api.ACLToken{{AccessorID: "acc", Name: "ci", Policy: "submit"}}})
		case "DELETE /v1/acl/tokens/acc":
			writeJSON(w, http.StatusOK, api.ACLTokenDeleted{Deleted: "acc"})
		case "PUT /v1/operator/snapshot":
			writeJSON(w, http.StatusOK, api.SnapshotRestored{Restored: true, Jobs: 2, Executions: 5})
		default:
			writeJSON(w, http.StatusNotFound, api.Error{Error: "no"})
		}
	})
	c := newTestClient(t, s.addr(), WithToken("the-secret"))
	ctx := context.Background()
	tok, err := c.BootstrapACL(ctx, "")
	require.NoError(t, err)
	assert.Equal(t, "acc", tok.AccessorID)
	_, err = c.BootstrapACL(ctx, "chosen-secret-0123")
	require.NoError(t, err)
	tok, err = c.CreateToken(ctx, api.ACLTokenRequest{Name: "ci", Policy: "submit"})
	require.NoError(t, err)
	assert.Equal(t, "s3cret-submit", tok.SecretID)
	list, err := c.Tokens(ctx)
	require.NoError(t, err)
	assert.Equal(t, []api.ACLToken{{AccessorID: "acc", Name: "ci", Policy: "submit"}}, list)
	require.NoError(t, c.DeleteToken(ctx, "acc"))
	restored, err := c.SnapshotRestore(ctx, []byte("snap"))
	require.NoError(t, err)
	assert.Equal(t, api.SnapshotRestored{Restored: true, Jobs: 2, Executions: 5}, restored)

	for _, tk := range gotToken {
		assert.Equal(t, "the-secret", tk)
	}
	assert.Equal(t, []string{"", "application/json", "application/json", "", "", "application/octet-stream"}, gotType,
		"a bodiless POST needs no type; a snapshot is binary")
	assert.Equal(t, `{"secret_id":"chosen-secret-0123"}`, gotBody[1])
	assert.Equal(t, `{"name":"ci","policy":"submit"}`, gotBody[2])

	// Without a token, none is sent.
	gotToken = nil
	c = newTestClient(t, s.addr())
	_, _ = c.Tokens(ctx)
	assert.Equal(t, []string{""}, gotToken)
}
