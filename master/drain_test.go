package master

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"jobmaster/api"
)

func TestDrainRequestsAreChecked(t *testing.T) {
	c := newTestCluster(t, 1)
	l := c.leader()
	for _, x := range []struct {
		method, path, body string
		want               int
		says               string
	}{
		{"POST", "/v1/executors/e1/drain", `{"deadline":"soon"}`, http.StatusBadRequest, `deadline \"soon\" is not a duration`},
		{"POST", "/v1/executors/e1/drain", `{"deadline":"-1s"}`, http.StatusBadRequest, "is negative"},
		{"POST", "/v1/executors/e1/drain", `{"deadline":"10000h"}`, http.StatusBadRequest, "is longer than 720h0m0s"},
		{"POST", "/v1/executors/e1/drain", `{"deadline":"1s","force":true}`, http.StatusBadRequest, "force: unknown field"},
		{"POST", "/v1/executors/e1/drain", `{"deadlne":"2s"}`, http.StatusBadRequest, `deadlne: unknown field (did you mean \"deadline\"?)`},
		{"POST", "/v1/executors/e1/drain", `{"deadline":30}`, http.StatusBadRequest, "deadline: want a string, got JSON number"},
		{"POST", "/v1/executors/e1/drain", `{"deadline":"1s"}{}`, http.StatusBadRequest, "unexpected data after the value"},
		{"POST", "/v1/executors/e1/drain", `{"deadline":"1s","Deadline":"1h"}`, http.StatusBadRequest, "Deadline: given twice"},
		{"POST", "/v1/executors/e1/drain", `[`, http.StatusBadRequest, "malformed JSON: unexpected end of input"},
		{"POST", "/v1/executors/bad%20id/drain", `{}`, http.StatusBadRequest, "executor id"},
		{"POST", "/v1/executors/e1/drain", `{"deadline":"1s"}`, http.StatusNotFound, `executor \"e1\" not found`},
		{"POST", "/v1/executors/e1/drain", `null`, http.StatusNotFound, `executor \"e1\" not found`}, // null: no body
		{"DELETE", "/v1/executors/e1/drain", ``, http.StatusNotFound, `executor \"e1\" not found`},
		{"PUT", "/v1/executors/e1/drain", `{}`, http.StatusMethodNotAllowed, "not allowed"},
		{"POST", "/v1/internal/executor-drain", `{"version":1}`, http.StatusBadRequest, "wire protocol version"},
	} {
		var body []byte
		if x.body != "" {
			body = []byte(x.body)
		}
		r := do(t, x.method, c.url(l, x.path), body)
		assert.Equal(t, x.want, r.status, "%s %s %s: %s", x.method, x.path, x.body, r.body)
		assert.Contains(t, string(r.body), x.says, "%s %s %s", x.method, x.path, x.body)
	}
	require.Equal(t, api.DefaultDrainDeadline, "1h")
}
