package executor

import (
	"bytes"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"jobmaster/wire"
)

// Whatever the settings, an executor refuses what a web page can make a
// browser send: a form's body, or a request from another origin.
func TestDriveByRequestsRefused(t *testing.T) {
	e := startExecutor(t, Config{})
	l := wire.Leader{Version: wire.Version, Token: 1, Node: "m1"}
	body := mustJSON(t, wire.NewDeployRequest(l, []wire.Task{simTask("j", 0, time.Hour, 0)}))
	send := func(method, path, ctype, origin string, body []byte) int {
		req, err := http.NewRequest(method, "http://"+e.Addr()+path, bytes.NewReader(body))
		require.NoError(t, err)
		if ctype != "" {
			req.Header.Set("Content-Type", ctype)
		}
		if origin != "" {
			req.Header.Set("Origin", origin)
		}
		resp, err := httpClient.Do(req)
		require.NoError(t, err)
		resp.Body.Close()
		return resp.StatusCode
	}
	assert.Equal(t, http.StatusUnsupportedMediaType, send("POST", wire.PathDeploy, "text/plain", "", body))
	assert.Equal(t, http.StatusUnsupportedMediaType, send("POST", wire.PathDeploy, "", "", body))
	assert.Equal(t, http.StatusForbidden, send("POST", wire.PathDeploy, "application/json", "http://evil.example", body))
	assert.Equal(t, http.StatusForbidden, send("GET", wire.PathExecutions, "", "http://evil.example", nil))
	assert.Empty(t, e.executions().Executions, "no refused deploy ran")
	assert.Equal(t, http.StatusOK, send("POST", wire.PathDeploy, "application/json", "", body))
	assert.Equal(t, http.StatusOK, send("GET", wire.PathExecutions, "", "http://"+e.Addr(), nil))
}

func TestSlotsAreBounded(t *testing.T) {
	_, err := Config{NodeID: "e", DataDir: "d", HTTPAddr: "a:1", Slots: wire.MaxSlots + 1}.withDefaults()
	require.ErrorContains(t, err, "slots: at most 1024, got 1025")
	_, err = Config{NodeID: "e", DataDir: "d", HTTPAddr: "a:1", Slots: wire.MaxSlots}.withDefaults()
	require.NoError(t, err)
}

// The data directory holds the tasks' directories, logs and partitions:
// it is made its owner's alone.
func TestDataDirIsPrivate(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "e1")
	require.NoError(t, os.Mkdir(dir, 0o755))
	require.NoError(t, os.Chmod(dir, 0o755))
	startExecutor(t, Config{DataDir: dir})
	st, err := os.Stat(dir)
	require.NoError(t, err)
	assert.Equal(t, fs.FileMode(0o700), st.Mode().Perm())
}
