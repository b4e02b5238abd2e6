package fleet

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/require"

	"jobmaster/wire"
)

// The scripted executor takes a deploy in each form the leader sends, and
// answers in kind: the reconciliation benchmark waits on these deploys.
func TestScriptedTakesEveryDeployForm(t *testing.T) {
	s := newScripted("rx1", 4)
	srv := httptest.NewServer(s.handler())
	defer srv.Close()
	l := wire.Leader{Version: wire.Version, Token: 1, Node: "m1"}
	task := func(job string) []wire.Task {
		return []wire.Task{{ExecutionID: wire.ExecutionID(job, "v", 0, 0), JobID: job, Vertex: "v", Parallelism: 1, Command: []string{"sim"}}}
	}
	post := func(ct string, body []byte) (*http.Response, []byte) {
		resp, err := http.Post(srv.URL+wire.PathDeploy, ct, bytes.NewReader(body))
		require.NoError(t, err)
		defer resp.Body.Close()
		var b bytes.Buffer
		_, err = b.ReadFrom(resp.Body)
		require.NoError(t, err)
		require.Equal(t, http.StatusOK, resp.StatusCode, "%s", b.Bytes())
		return resp, b.Bytes()
	}

	bin := wire.NewDeployRequest(l, task("b"))
	resp, body := post(wire.DeployType, wire.AppendDeploy(nil, &bin))
	require.Equal(t, wire.DeployType, resp.Header.Get("Content-Type"))
	got, err := wire.DecodeDeployResponse(body)
	require.NoError(t, err)
	require.Len(t, got.Executions, 1)
	require.Equal(t, wire.StateRunning, got.Executions[0].State)

	js := wire.NewDeployRequest(l, task("j"))
	data, err := json.Marshal(js)
	require.NoError(t, err)
	resp, body = post("application/json", data)
	require.Contains(t, resp.Header.Get("Content-Type"), "application/json")
	var gotJSON wire.DeployResponse
	require.NoError(t, json.Unmarshal(body, &gotJSON))
	require.Len(t, gotJSON.Executions, 1)

	s.mu.Lock()
	defer s.mu.Unlock()
	require.Contains(t, s.deploys, "b/v/0/0")
	require.Contains(t, s.deploys, "j/v/0/0")
}
