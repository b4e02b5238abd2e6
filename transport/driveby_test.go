package transport

import (
	"crypto/tls"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func statusOf(err error) int {
	var se *StatusError
	if errors.As(err, &se) {
		return se.Code
	}
	if err != nil {
		return -1
	}
	return 0
}

func TestCheckContentType(t *testing.T) {
	for _, c := range []struct {
		name, method, ct string
		body             io.Reader
		want             int
	}{
		{"json", "PUT", "application/json", strings.NewReader("{}"), 0},
		{"json with charset", "POST", "application/json; charset=utf-8", strings.NewReader("{}"), 0},
		{"upper case", "POST", "Application/JSON", strings.NewReader("{}"), 0},
		{"a form's text/plain", "POST", "text/plain", strings.NewReader("{}"), 415},
		{"a form's urlencoded", "PUT", "application/x-www-form-urlencoded", strings.NewReader("{}"), 415},
		{"multipart", "POST", "multipart/form-data; boundary=x", strings.NewReader("{}"), 415},
		{"none", "POST", "", strings.NewReader("{}"), 415},
		{"garbage", "POST", ";;;", strings.NewReader("{}"), 415},
		{"a bodiless write", "POST", "", nil, 0},
		{"a bodiless write with a type", "POST", "text/plain", nil, 0},
		{"a read", "GET", "text/plain", strings.NewReader("x"), 0},
		{"delete with a body", "DELETE", "text/plain", strings.NewReader("x"), 415},
	} {
		r := httptest.NewRequest(c.method, "/v1/jobs/x", c.body)
		if c.ct != "" {
			r.Header.Set("Content-Type", c.ct)
		}
		err := CheckContentType(r, JSONType)
		assert.Equal(t, c.want, statusOf(err), "%s: %v", c.name, err)
	}
	// A chunked body (length unknown) is a body.
	r := httptest.NewRequest("PUT", "/v1/operator/snapshot", strings.NewReader("snap"))
	r.ContentLength = -1
	r.Header.Set("Content-Type", "application/json")
	err := CheckContentType(r, BinaryType)
	require.Equal(t, 415, statusOf(err))
	require.ErrorContains(t, err, `PUT /v1/operator/snapshot takes a body of type application/octet-stream, not "application/json"`)
	r.Header.Set("Content-Type", BinaryType)
	require.NoError(t, CheckContentType(r, BinaryType))

	// An encoded body is refused: it would be read as another body.
	for ce, want := range map[string]int{"gzip": 415, "deflate, gzip": 415, "identity": 0, "IDENTITY": 0} {
		r := httptest.NewRequest("PUT", "/v1/jobs/x", strings.NewReader("{}"))
		r.Header.Set("Content-Type", JSONType)
		r.Header.Set("Content-Encoding", ce)
		assert.Equal(t, want, statusOf(CheckContentType(r, JSONType)), ce)
	}
}

func TestCheckOrigin(t *testing.T) {
	for _, c := range []struct {
		origin, host string
		https        bool
		ok           bool
	}{
		{"", "127.0.0.1:7401", false, true},
		{"http://127.0.0.1:7401", "127.0.0.1:7401", false, true},
		{"HTTP://LOCALHOST:7401", "localhost:7401", false, true},
		{"https://jm.example.com", "jm.example.com", true, true},
		{"https://jm.example.com:443", "jm.example.com", true, true},
		{"https://jm.example.com", "jm.example.com:443", true, true},
		{"http://[::1]:7401", "[::1]:7401", false, true},
		{"http://evil.example", "127.0.0.1:7401", false, false},
		{"http://127.0.0.1:8080", "127.0.0.1:7401", false, false},
		{"https://127.0.0.1:7401", "127.0.0.1:7401", false, false},
		{"http://127.0.0.1:7401", "127.0.0.1:7401", true, false},
		{"null", "127.0.0.1:7401", false, false},
		{"http://127.0.0.1:7401/path", "127.0.0.1:7401", false, false},
		{"127.0.0.1:7401", "127.0.0.1:7401", false, false},
		{"http://user@127.0.0.1:7401", "127.0.0.1:7401", false, false},
		// DNS rebinding: another site's name pointed at the node, its page
		// same-origin with it. Over plain HTTP a browser must use an IP or
		// localhost; with TLS the certificate does not cover the name.
		{"http://attacker.example:9404", "attacker.example:9404", false, false},
		{"http://jm.internal:7401", "jm.internal:7401", false, false},
	} {
		r := httptest.NewRequest("GET", "/v1/jobs", nil)
		r.Host = c.host
		if c.origin != "" {
			r.Header.Set("Origin", c.origin)
		}
		if c.https {
			r.TLS = &tls.ConnectionState{}
		}
		err := CheckOrigin(r)
		if c.ok {
			assert.NoError(t, err, "%q at %s", c.origin, c.host)
		} else {
			assert.Equal(t, http.StatusForbidden, statusOf(err), "%q at %s", c.origin, c.host)
		}
	}
}

// A browser's request without Origin (a same-origin GET) is known by its
// Sec-Fetch-* headers: over plain HTTP to a name it is refused, since a
// rebound page reads the answer. Other clients (the CLI, curl) send none
// and may use names.
func TestCheckOriginRefusesABrowserAtANameOverPlainHTTP(t *testing.T) {
	for _, c := range []struct {
		host   string
		header string
		https  bool
		ok     bool
	}{
		{"attacker.example:9404", "Sec-Fetch-Site", false, false},
		{"attacker.example:9404", "Sec-Fetch-Mode", false, false},
		{"attacker.example:9404", "", false, true},
		{"attacker.example:9404", "Sec-Fetch-Site", true, true},
		{"127.0.0.1:7401", "Sec-Fetch-Site", false, true},
		{"[::1]:7401", "Sec-Fetch-Site", false, true},
		{"localhost:7401", "Sec-Fetch-Site", false, true},
		{"LOCALHOST", "Sec-Fetch-Mode", false, true},
	} {
		r := httptest.NewRequest("GET", "/v1/jobs", nil)
		r.Host = c.host
		if c.header != "" {
			r.Header.Set(c.header, "same-origin")
		}
		if c.https {
			r.TLS = &tls.ConnectionState{}
		}
		err := CheckOrigin(r)
		if c.ok {
			assert.NoError(t, err, "%s with %q, https %v", c.host, c.header, c.https)
		} else {
			assert.Equal(t, http.StatusForbidden, statusOf(err), "%s with %q", c.host, c.header)
			assert.Contains(t, err.Error(), "IP address or localhost")
		}
	}
}
