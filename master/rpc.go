package master

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"jobmaster/transport"
)

// errFencedOff: an executor has seen a newer leader than this one.
var errFencedOff = errors.New("fenced off by a newer leader")

// postJSON sends a JSON request to an executor or master and decodes the
// JSON answer into out (when non-nil). A 409 (the executor's StaleToken
// answer) is errFencedOff with the executor's reason; another status
// outside 2xx wraps a *transport.StatusError.
func postJSON(ctx context.Context, c *http.Client, addr, path string, in, out any, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	err := transport.PostJSON(ctx, c, transport.URL(c, addr, path), in, out)
	var se *transport.StatusError
	if !errors.As(err, &se) {
		return err // nil, or no answer
	}
	if se.Code == http.StatusConflict {
		return fmt.Errorf("%w: %s", errFencedOff, se.Message)
	}
	return fmt.Errorf("%s%s: %w", addr, path, se)
}
