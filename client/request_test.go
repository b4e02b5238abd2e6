package client

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"jobmaster/api"
)

func okJobs(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, api.JobList{Jobs: []api.JobSummary{{ID: "j1", Name: "wc", Status: "RUNNING"}}})
}

func TestFailoverToNextAddressAndRemember(t *testing.T) {
	good := newServer(t, okJobs)
	dead := deadAddr(t)
	c := newTestClient(t, dead+","+good.addr())

	jobs, err := c.Jobs(context.Background())
	require.NoError(t, err)
	require.Len(t, jobs, 1)
	assert.Equal(t, "j1", jobs[0].ID)

	// The next call starts at the master that answered.
	_, err = c.Jobs(context.Background())
	require.NoError(t, err)
	assert.Equal(t, int64(2), good.hits.Load())
	assert.Equal(t, 1, c.first())
}

func TestStartsFromLastThatWorked(t *testing.T) {
	var firstUp atomic.Bool
	first := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		if !firstUp.Load() {
			writeJSON(w, http.StatusServiceUnavailable, api.Error{Error: "no leader"})
			return
		}
		okJobs(w, r)
	})
	second := newServer(t, okJobs)
	c := newTestClient(t, first.addr()+","+second.addr())

	_, err := c.Jobs(context.Background())
	require.NoError(t, err)
	assert.Equal(t, int64(1), first.hits.Load())
	assert.Equal(t, int64(1), second.hits.Load())

	firstUp.Store(true)
	_, err = c.Jobs(context.Background())
	require.NoError(t, err)
	assert.Equal(t, int64(1), first.hits.Load(), "the second call must start at the master that answered")
	assert.Equal(t, int64(2), second.hits.Load())
}

func TestRetries503UntilSuccess(t *testing.T) {
	var calls atomic.Int64
	s := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		if calls.Add(1) <= 3 {
			writeJSON(w, http.StatusServiceUnavailable, api.Error{Error: "no leader"})
			return
		}
		okJobs(w, r)
	})
	c := newTestClient(t, s.addr())

	jobs, err := c.Jobs(context.Background())
	require.NoError(t, err)
	assert.Len(t, jobs, 1)
	assert.Equal(t, int64(4), s.hits.Load())
}

func TestPostFinalErrorIsNotOutcomeUnknown(t *testing.T) {
	s := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusBadRequest, api.Error{Error: "bad spec"})
	})
	_, err := newTestClient(t, s.addr()).CreateJob(context.Background(), []byte(`{}`))
	var apiErr *APIError
	require.ErrorAs(t, err, &apiErr)
	assert.NotErrorIs(t, err, ErrOutcomeUnknown, "a 400 says the job was not created")
}

func Test4xxIsFinal(t *testing.T) {
	for _, code := range []int{http.StatusBadRequest, http.StatusNotFound, http.StatusConflict, http.StatusRequestEntityTooLarge} {
		t.Run(http.StatusText(code), func(t *testing.T) {
			bad := newServer(t, func(w http.ResponseWriter, r *http.Request) {
				writeJSON(w, code, api.Error{Error: "nope"})
			})
			other := newServer(t, okJobs)
			c := newTestClient(t, bad.addr()+","+other.addr())

			_, err := c.Job(context.Background(), "j1")
			var apiErr *APIError
			require.ErrorAs(t, err, &apiErr)
			assert.Equal(t, code, apiErr.StatusCode)
			assert.Equal(t, "nope", apiErr.Message)
			assert.Equal(t, int64(1), bad.hits.Load())
			assert.Equal(t, int64(0), other.hits.Load(), "a 4xx must not be retried elsewhere")
		})
	}
}

func TestErrorBodyThatIsNotJSON(t *testing.T) {
	s := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "404 page not found", http.StatusNotFound)
	})
	c := newTestClient(t, s.addr())
	_, err := c.Jobs(context.Background())
	var apiErr *APIError
	require.ErrorAs(t, err, &apiErr)
	assert.Equal(t, "404 page not found", apiErr.Message)
	assert.Equal(t, "404 page not found (HTTP 404)", err.Error())
	assert.True(t, IsNotFound(err))
}

func TestAllUnreachableListsEveryAddress(t *testing.T) {
	unavailable := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusServiceUnavailable, api.Error{Error: "no leader elected"})
	})
	dead := deadAddr(t)
	// A deadline long enough for several rounds even on a loaded machine.
	c := newTestClient(t, dead+","+unavailable.addr(), WithTimeout(2*time.Second))

	_, err := c.Jobs(context.Background())
	var u *UnreachableError
	require.ErrorAs(t, err, &u)
	require.Len(t, u.Attempts, 2)
	assert.Equal(t, "http://"+dead, u.Attempts[0].Address)
	msg := err.Error()
	assert.Contains(t, msg, dead+" (connection refused)")
	assert.Contains(t, msg, unavailable.addr()+" (no leader elected (HTTP 503))")
	assert.Greater(t, unavailable.hits.Load(), int64(1), "the round must be retried until the deadline")
	assert.True(t, u.NoLeader(), "a master answered: it has no leader")

	_, err = newTestClient(t, dead, WithTimeout(200*time.Millisecond)).Jobs(context.Background())
	require.ErrorAs(t, err, &u)
	assert.False(t, u.NoLeader(), "nothing answered")
}

func TestCallerCancelIsNotUnreachable(t *testing.T) {
	c := newTestClient(t, deadAddr(t))
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := c.Jobs(ctx)
	require.ErrorIs(t, err, context.Canceled)
	var u *UnreachableError
	assert.False(t, errors.As(err, &u))
}

func TestHungMasterIsSkippedForIdempotentRequests(t *testing.T) {
	release := make(chan struct{})
	hung := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
		case <-release:
		}
	})
	defer close(release)
	good := newServer(t, okJobs)
	c := newTestClient(t, hung.addr()+","+good.addr(), WithAttemptTimeout(50*time.Millisecond))

	_, err := c.Jobs(context.Background())
	require.NoError(t, err)
	assert.Equal(t, int64(1), good.hits.Load())
}

func TestPutIsRetriedAfterHangUp(t *testing.T) {
	flaky := newServer(t, hangUp(t))
	var got atomic.Int64
	good := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		got.Add(1)
		writeJSON(w, http.StatusCreated, api.SubmitResponse{ID: "j1"})
	})
	c := newTestClient(t, flaky.addr()+","+good.addr())

	created, err := c.SubmitJob(context.Background(), "j1", []byte(`{}`))
	require.NoError(t, err)
	assert.True(t, created)
	assert.Equal(t, int64(1), got.Load())
}

func TestPostIsNotRetriedOnceSent(t *testing.T) {
	for name, h := range map[string]http.HandlerFunc{
		"hang up": hangUp(t),
		"503": func(w http.ResponseWriter, r *http.Request) {
			writeJSON(w, http.StatusServiceUnavailable, api.Error{Error: "no leader"})
		},
	} {
		t.Run(name, func(t *testing.T) {
			first := newServer(t, h)
			second := newServer(t, func(w http.ResponseWriter, r *http.Request) {
				writeJSON(w, http.StatusCreated, api.SubmitResponse{ID: "dup"})
			})
			c := newTestClient(t, first.addr()+","+second.addr())

			_, err := c.CreateJob(context.Background(), []byte(`{}`))
			require.ErrorIs(t, err, ErrOutcomeUnknown, "a 503 may follow a commit, as a hang-up may")
			assert.Equal(t, int64(1), first.hits.Load())
			assert.Equal(t, int64(0), second.hits.Load(), "a POST that may have been received must not be resent")
		})
	}
}

func TestPostOutcomeUnknownAfterHangUp(t *testing.T) {
	s := newServer(t, hangUp(t))
	c := newTestClient(t, s.addr())
	_, err := c.CreateJob(context.Background(), []byte(`{}`))
	require.ErrorIs(t, err, ErrOutcomeUnknown)
	assert.Contains(t, err.Error(), "POST /v1/jobs at "+s.addr())
}

func TestPostIsRetriedWhenNothingWasSent(t *testing.T) {
	good := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusCreated, api.SubmitResponse{ID: "gen-1"})
	})
	c := newTestClient(t, deadAddr(t)+","+good.addr())
	id, err := c.CreateJob(context.Background(), []byte(`{}`))
	require.NoError(t, err)
	assert.Equal(t, "gen-1", id)
	assert.Equal(t, int64(1), good.hits.Load())
}

func TestPostWaitsForAReachableMaster(t *testing.T) {
	// Only connection-refused failures: the POST keeps being retried until
	// the deadline, then reports every address.
	c := newTestClient(t, deadAddr(t)+","+deadAddr(t), WithTimeout(100*time.Millisecond))
	_, err := c.CreateJob(context.Background(), []byte(`{}`))
	var u *UnreachableError
	require.ErrorAs(t, err, &u)
	assert.Len(t, u.Attempts, 2)
	assert.NotErrorIs(t, err, ErrOutcomeUnknown)
}

func TestRetryNotifyAfterEachFailedRound(t *testing.T) {
	var calls atomic.Int64
	s := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		if calls.Add(1) <= 2 {
			writeJSON(w, http.StatusServiceUnavailable, api.Error{Error: "no leader"})
			return
		}
		okJobs(w, r)
	})
	dead := deadAddr(t)
	var notes []string
	c := newTestClient(t, s.addr()+","+dead, WithRetryNotify(func(err *UnreachableError) {
		notes = append(notes, err.Error())
	}))
	_, err := c.Jobs(context.Background())
	require.NoError(t, err)
	want := "no leader; tried " + s.addr() + " (no leader (HTTP 503)), " + dead + " (connection refused)"
	assert.Equal(t, []string{want, want}, notes)
}

func TestPostCanceledAfterSendingIsOutcomeUnknown(t *testing.T) {
	arrived := make(chan struct{})
	s := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.ReadAll(r.Body) // then the server notices the client leave
		close(arrived)
		<-r.Context().Done()
	})
	c := newTestClient(t, s.addr())
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		<-arrived
		cancel()
	}()
	_, err := c.CreateJob(ctx, []byte(`{}`))
	require.ErrorIs(t, err, ErrOutcomeUnknown)
	require.ErrorIs(t, err, context.Canceled)
}

// A restore's 503 is a refusal before anything happened; its 502 is a
// forward whose answer was lost.
func TestRestoreOutcome(t *testing.T) {
	for code, unknown := range map[int]bool{http.StatusServiceUnavailable: false, http.StatusBadGateway: true} {
		s := newServer(t, func(w http.ResponseWriter, r *http.Request) {
			writeJSON(w, code, api.Error{Error: "no"})
		})
		_, err := newTestClient(t, s.addr()).SnapshotRestore(context.Background(), []byte("snap"))
		var apiErr *APIError
		require.ErrorAs(t, err, &apiErr, "%d", code)
		assert.Equal(t, unknown, errors.Is(err, ErrOutcomeUnknown), "%d", code)
		assert.Equal(t, int64(1), s.hits.Load(), "a restore is not resent")
	}
}

// A master names the leader in its answers: the next call goes there when
// the leader is one of the client's addresses, and follows it when it
// changes; a leader outside the list is ignored.
func TestFollowsTheLeaderItIsTold(t *testing.T) {
	var leader atomic.Value
	named := func(w http.ResponseWriter, r *http.Request) {
		if l, _ := leader.Load().(string); l != "" {
			w.Header().Set(api.LeaderHeader, l)
		}
		okJobs(w, r)
	}
	a, b, c3 := newServer(t, named), newServer(t, named), newServer(t, named)
	c := newTestClient(t, a.addr()+","+b.addr()+","+c3.addr())
	host := func(s *server) string { return s.addr() }

	leader.Store(host(b))
	_, err := c.Jobs(context.Background())
	require.NoError(t, err)
	assert.Equal(t, int64(1), a.hits.Load(), "the first call goes to the first address")
	assert.Equal(t, 1, c.first(), "the next starts at the leader a named")
	_, err = c.Jobs(context.Background())
	require.NoError(t, err)
	assert.Equal(t, int64(1), b.hits.Load())

	leader.Store(host(c3))
	_, err = c.Jobs(context.Background())
	require.NoError(t, err)
	assert.Equal(t, int64(2), b.hits.Load())
	assert.Equal(t, 2, c.first(), "the leader changed: the client follows")

	leader.Store("10.9.9.9:7401")
	_, err = c.Jobs(context.Background())
	require.NoError(t, err)
	assert.Equal(t, int64(1), c3.hits.Load())
	assert.Equal(t, 2, c.first(), "a leader outside the list is not followed")
}

// Every master refusing the connection round after round: nothing listens
// at any address, and the call ends then rather than at its timeout.
func TestGiveUpWhenEveryMasterRefuses(t *testing.T) {
	a, b := deadAddr(t), deadAddr(t)
	c := newTestClient(t, a+","+b, WithTimeout(time.Hour), WithGiveUpWhenRefused(20*time.Millisecond))
	_, err := c.Jobs(context.Background())
	var u *UnreachableError
	require.ErrorAs(t, err, &u)
	assert.True(t, u.Refused())
	assert.NotErrorIs(t, err, context.DeadlineExceeded)
}

// A master that answers, even with no leader, is no refusal: the call goes
// on retrying, and succeeds once that master has a leader.
func TestNoGiveUpWhileAMasterAnswers(t *testing.T) {
	var calls atomic.Int64
	s := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		if calls.Add(1) <= 5 {
			writeJSON(w, http.StatusServiceUnavailable, api.Error{Error: "no leader"})
			return
		}
		okJobs(w, r)
	})
	c := newTestClient(t, deadAddr(t)+","+s.addr(), WithTimeout(time.Hour), WithGiveUpWhenRefused(time.Nanosecond))
	_, err := c.Jobs(context.Background())
	require.NoError(t, err)
	assert.Equal(t, int64(6), calls.Load())
}

// NeverConnected: every master timed out before a request could be sent
// (a deadline too short to connect, or connections dropped); not when one
// took the request and held it, nor when one refused.
func TestNeverConnected(t *testing.T) {
	dialTimeout := &net.OpError{Op: "dial", Net: "tcp", Err: os.ErrDeadlineExceeded}
	held := &net.OpError{Op: "read", Net: "tcp", Err: os.ErrDeadlineExceeded}
	refused := &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}
	for _, tc := range []struct {
		errs []error
		want bool
	}{
		{[]error{dialTimeout, dialTimeout}, true},
		{[]error{dialTimeout, held}, false},
		{[]error{dialTimeout, refused}, false},
		{nil, false},
	} {
		e := &UnreachableError{}
		for i, err := range tc.errs {
			e.Attempts = append(e.Attempts, Attempt{Address: fmt.Sprintf("http://127.0.0.1:%d", 7400+i), Err: err})
		}
		require.Equal(t, tc.want, e.NeverConnected(), "%v", tc.errs)
	}
}
