package transport

import (
	"bytes"
	"encoding/json"
	"errors"
	"net/http"
)

// Format is how a role lays out the JSON of its answers. Masters indent
// theirs, for people reading curl's output; executors answer compact JSON
// (docs/api.md).
type Format int

const (
	// Compact is JSON on one line.
	Compact Format = iota
	// Indented is JSON indented by two spaces.
	Indented
)

// WriteJSON answers with status and v as JSON, followed by a newline. If v
// cannot be encoded, the answer is a 500 with an error body instead.
func (f Format) WriteJSON(w http.ResponseWriter, status int, v any) {
	status, b := f.Body(status, v)
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(b)
}

// Body is the status and body WriteJSON answers with: v as JSON and a
// newline, or a 500 with an error body if v cannot be encoded.
func (f Format) Body(status int, v any) (int, []byte) {
	b, err := f.marshal(v)
	if err != nil {
		status = http.StatusInternalServerError
		b, _ = f.marshal(errorBody{Error: "encode answer: " + err.Error()})
	}
	return status, append(b, '\n')
}

// WriteError answers with status and the error body {"error": msg}.
func (f Format) WriteError(w http.ResponseWriter, status int, msg string) {
	f.WriteJSON(w, status, errorBody{Error: msg})
}

// Reject answers a request that failed with err: a *StatusError with its
// code and message (as ReadBody and DecodeBody return them), any other error
// with 500 and its text.
func (f Format) Reject(w http.ResponseWriter, err error) {
	var se *StatusError
	if errors.As(err, &se) {
		f.WriteError(w, se.Code, se.Message)
		return
	}
	f.WriteError(w, http.StatusInternalServerError, err.Error())
}

// marshal encodes v without escaping <, > and & as \u003c and the like:
// answers are read by people through curl ("a -> b -> a", not
// "a -\u003e b"), and none is ever put in a page as HTML (the web UI
// builds its pages without innerHTML, and answers go with nosniff).
func (f Format) marshal(v any) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if f == Indented {
		enc.SetIndent("", "  ")
	}
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n")), nil
}
