package transport

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
)

// NewJSONRequest returns a request to url whose body is in encoded as JSON.
func NewJSONRequest(ctx context.Context, method, url string, in any) (*http.Request, error) {
	body, err := json.Marshal(in)
	if err != nil {
		return nil, fmt.Errorf("encode request: %w", err)
	}
	req, err := http.NewRequestWithContext(ctx, method, url, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	return req, nil
}

// DecodeResponse reads resp's body (ReadResponse) and decodes it, unless
// blank, into out (when out is not nil).
func DecodeResponse(resp *http.Response, limit int64, out any) error {
	data, err := ReadResponse(resp, limit)
	if err != nil {
		return err
	}
	if out == nil || len(bytes.TrimSpace(data)) == 0 {
		return nil
	}
	if err := json.Unmarshal(data, out); err != nil {
		return fmt.Errorf("malformed answer: %w", err)
	}
	return nil
}

// ReadResponse reads resp's body (at most limit bytes) and closes it. A
// status outside 2xx is a *StatusError with the peer's message (taken from
// the first limit bytes of a longer body). Otherwise a body longer than
// limit is an error wrapping ErrTooLarge.
func ReadResponse(resp *http.Response, limit int64) ([]byte, error) {
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, limit+1))
	if err != nil {
		return nil, err
	}
	tooLarge := int64(len(data)) > limit
	if tooLarge {
		data = data[:limit]
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return nil, &StatusError{Code: resp.StatusCode, Message: ErrorMessage(data)}
	}
	if tooLarge {
		return nil, fmt.Errorf("%w of %d bytes", ErrTooLarge, limit)
	}
	return data, nil
}

// PostJSON posts in as JSON to url through c and decodes the answer, of at
// most MaxResponseBytes, into out (see DecodeResponse). Its errors are
// those of c.Do, a *StatusError, or one wrapping ErrTooLarge.
func PostJSON(ctx context.Context, c *http.Client, url string, in, out any) error {
	body, err := json.Marshal(in)
	if err != nil {
		return fmt.Errorf("encode request: %w", err)
	}
	return PostBody(ctx, c, url, JSONType, body, out)
}

// PostBody posts body, of media type contentType, to url through c and
// decodes the JSON answer into out, as PostJSON does.
func PostBody(ctx context.Context, c *http.Client, url, contentType string, body []byte, out any) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", contentType)
	resp, err := c.Do(req)
	if err != nil {
		return err
	}
	return DecodeResponse(resp, MaxResponseBytes, out)
}

// GetJSON gets url through c and decodes the answer, of at most
// MaxResponseBytes, into out, as PostJSON does.
func GetJSON(ctx context.Context, c *http.Client, url string, out any) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := c.Do(req)
	if err != nil {
		return err
	}
	return DecodeResponse(resp, MaxResponseBytes, out)
}

// ReadBody reads the body of a request to a server, at most limit bytes. Its
// error is a *StatusError to answer with: 413 for a longer body, 400 for
// one that could not be read.
func ReadBody(w http.ResponseWriter, r *http.Request, limit int64) ([]byte, error) {
	if err := DeclaredTooLarge(r, limit); err != nil {
		return nil, err
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, limit))
	if err != nil {
		return nil, bodyError(err, limit)
	}
	return body, nil
}

// DecodeBody decodes the body of a request to a server, at most limit
// bytes, into v: exactly one JSON value, with nothing but blanks after it.
// Unknown fields are ignored. Its error is a *StatusError to answer with:
// 413 for a longer body, 400 for an empty or malformed one (a body cut
// short is malformed).
func DecodeBody(w http.ResponseWriter, r *http.Request, v any, limit int64) error {
	if err := DeclaredTooLarge(r, limit); err != nil {
		return err
	}
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, limit))
	err := dec.Decode(v)
	if err == nil {
		if _, terr := dec.Token(); terr != io.EOF {
			err = errors.New("unexpected data after the JSON body")
			if terr != nil && !errors.Is(terr, io.ErrUnexpectedEOF) {
				err = terr
			}
		}
	}
	var tooBig *http.MaxBytesError
	switch {
	case err == nil:
		return nil
	case errors.As(err, &tooBig):
		return bodyError(err, limit)
	case errors.Is(err, io.EOF):
		return &StatusError{Code: http.StatusBadRequest, Message: "empty request body: want a JSON object"}
	}
	return &StatusError{Code: http.StatusBadRequest, Message: fmt.Sprintf("malformed request body: %v", err)}
}

// DeclaredTooLarge is the 413 for a request that waits for "100 Continue"
// before it sends a body whose Content-Length is over limit: answered
// before any of it is read, the client gets the 413 rather than a go-ahead
// and then a connection closed under it. nil otherwise: a client that
// sends its body at once would have its connection reset under the body
// it is still sending, so that body is read up to the limit first.
func DeclaredTooLarge(r *http.Request, limit int64) error {
	if r.ContentLength > limit && strings.EqualFold(r.Header.Get("Expect"), "100-continue") {
		return &StatusError{Code: http.StatusRequestEntityTooLarge, Message: fmt.Sprintf("request body larger than %d bytes", limit)}
	}
	return nil
}

// bodyError is the answer to a request body that could not be read.
func bodyError(err error, limit int64) error {
	var tooBig *http.MaxBytesError
	if errors.As(err, &tooBig) {
		return &StatusError{Code: http.StatusRequestEntityTooLarge, Message: fmt.Sprintf("request body larger than %d bytes", limit)}
	}
	return &StatusError{Code: http.StatusBadRequest, Message: "reading request body: " + err.Error()}
}
