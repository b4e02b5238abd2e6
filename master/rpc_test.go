package master

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"jobmaster/transport"
	"jobmaster/wire"
)

// TestPostJSONErrors: the tracker tells a fenced-off leader from any other
// failure with errors.Is(err, errFencedOff), and nothing else.
func TestPostJSONErrors(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case wire.PathHeartbeat:
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusConflict)
			_ = json.NewEncoder(w).Encode(wire.StaleToken{Error: "stale fencing token 3: the newest seen is 7", Token: 7})
		case wire.PathDeploy:
			transport.Compact.WriteError(w, http.StatusBadRequest, "no tasks")
		default:
			transport.Compact.WriteJSON(w, http.StatusOK, wire.DeployResponse{})
		}
	}))
	defer srv.Close()
	c := transport.NewClient(transport.ClientOptions{})
	defer c.CloseIdleConnections()
	addr := transport.HostPort(srv.URL)
	ctx := context.Background()

	err := postJSON(ctx, c, addr, wire.PathHeartbeat, struct{}{}, nil, time.Minute)
	require.ErrorIs(t, err, errFencedOff)
	assert.Equal(t, "fenced off by a newer leader: stale fencing token 3: the newest seen is 7", err.Error())

	err = postJSON(ctx, c, addr, wire.PathDeploy, struct{}{}, nil, time.Minute)
	require.Error(t, err)
	assert.NotErrorIs(t, err, errFencedOff)
	var se *transport.StatusError
	require.ErrorAs(t, err, &se)
	assert.Equal(t, http.StatusBadRequest, se.Code)
	assert.Equal(t, "no tasks", se.Message)
	assert.Contains(t, err.Error(), addr+wire.PathDeploy)

	var out wire.DeployResponse
	require.NoError(t, postJSON(ctx, c, addr, wire.PathCancel, struct{}{}, &out, time.Minute))

	srv.Close()
	err = postJSON(ctx, c, addr, wire.PathCancel, struct{}{}, nil, time.Minute)
	require.Error(t, err, "no answer")
	var none *transport.StatusError
	assert.False(t, errors.As(err, &none), "no answer is no status: %v", err)
	assert.NotErrorIs(t, err, errFencedOff)
}
