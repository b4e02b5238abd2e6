package transport

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
)

// ErrTooLarge is wrapped by the error of reading an answer longer than its
// limit. Nothing of such an answer is decoded.
var ErrTooLarge = errors.New("answer larger than the limit")

// StatusError is an answer whose status is not 2xx: one received from a
// peer (DecodeResponse), or one a server is about to give (ReadBody,
// DecodeBody). Callers match it with errors.As and look at Code.
type StatusError struct {
	// Code is the HTTP status code.
	Code int
	// Message is the error body's message; for an answer whose body was not
	// an error body, the start of the body (at most maxMessage bytes).
	Message string
}

// Error returns the status as HTTP writes it and the message:
// "409 Conflict: stale fencing token 3".
func (e *StatusError) Error() string {
	status := fmt.Sprintf("%d %s", e.Code, http.StatusText(e.Code))
	if e.Message == "" {
		return status
	}
	return status + ": " + e.Message
}

// errorBody is the body of every error answer.
type errorBody struct {
	Error string `json:"error"`
}

// maxMessage bounds the message taken from a body that is not an error
// body.
const maxMessage = 300

// ErrorMessage returns the message of an error body, or, when body is not
// one, its start with blanks trimmed (at most maxMessage bytes, then "...").
func ErrorMessage(body []byte) string {
	var e errorBody
	if json.Unmarshal(body, &e) == nil && e.Error != "" {
		return e.Error
	}
	msg := strings.TrimSpace(string(body))
	if len(msg) > maxMessage {
		msg = msg[:maxMessage] + "..."
	}
	return msg
}
