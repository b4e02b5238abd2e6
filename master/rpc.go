package master

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"

	"jobmaster/wire"
)

// errFencedOff: an executor has seen a newer leader than this one.
var errFencedOff = errors.New("fenced off by a newer leader")

// postJSON sends a JSON request to an executor or master and decodes the
// JSON answer into out (when non-nil).
func postJSON(ctx context.Context, c *http.Client, addr, path string, in, out any, timeout time.Duration) error {
	body, err := json.Marshal(in)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+addr+path, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := c.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return err
	}
	switch {
	case resp.StatusCode == http.StatusConflict:
		var st wire.StaleToken
		_ = json.Unmarshal(data, &st)
		return fmt.Errorf("%w: %s", errFencedOff, st.Error)
	case resp.StatusCode >= 300:
		var e wire.Error
		_ = json.Unmarshal(data, &e)
		return fmt.Errorf("%s%s: %s: %s", addr, path, resp.Status, e.Error)
	}
	if out == nil || len(data) == 0 {
		return nil
	}
	return json.Unmarshal(data, out)
}
