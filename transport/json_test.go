package transport

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

type answer struct {
	N int `json:"n"`
}

// response builds an answer with status and body.
func response(status int, body string) *http.Response {
	return &http.Response{StatusCode: status, Body: io.NopCloser(strings.NewReader(body))}
}

func TestDecodeResponse(t *testing.T) {
	tests := []struct {
		name   string
		status int
		body   string
		limit  int64
		want   answer
		code   int    // a *StatusError with this code, 0 if none
		msg    string // its message
		tooBig bool
		errHas string
	}{
		{name: "ok", status: 200, body: `{"n": 3}`, limit: 100, want: answer{N: 3}},
		{name: "no content", status: 204, body: ``, limit: 100},
		{name: "blank body", status: 200, body: " \n", limit: 100},
		{name: "at the limit", status: 200, body: `{"n":12}`, limit: 8, want: answer{N: 12}},
		{name: "over the limit", status: 200, body: `{"n":123}`, limit: 8, tooBig: true},
		{name: "error over the limit", status: 500, body: strings.Repeat("x", 9), limit: 8, code: 500, msg: "xxxxxxxx"},
		{name: "malformed", status: 200, body: `{"n":`, limit: 100, errHas: "malformed answer"},
		{name: "stale token", status: 409, body: `{"error":"stale fencing token 3","token":7}`, limit: 100,
			code: 409, msg: "stale fencing token 3"},
		{name: "error body", status: 400, body: `{"error":"bad"}`, limit: 100, code: 400, msg: "bad"},
		{name: "not an error body", status: 502, body: "  bad gateway\n", limit: 100, code: 502, msg: "bad gateway"},
		{name: "redirect", status: 307, body: ``, limit: 100, code: 307},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got answer
			err := DecodeResponse(response(tt.status, tt.body), tt.limit, &got)
			var se *StatusError
			switch {
			case tt.tooBig:
				require.ErrorIs(t, err, ErrTooLarge)
				assert.False(t, errors.As(err, &se))
			case tt.code != 0:
				require.ErrorAs(t, err, &se)
				assert.Equal(t, tt.code, se.Code)
				assert.Equal(t, tt.msg, se.Message)
			case tt.errHas != "":
				require.Error(t, err)
				assert.Contains(t, err.Error(), tt.errHas)
			default:
				require.NoError(t, err)
				assert.Equal(t, tt.want, got)
			}
		})
	}
}

func TestDecodeResponseNilOut(t *testing.T) {
	require.NoError(t, DecodeResponse(response(200, `{"n": 3}`), 100, nil))
}

func TestErrorMessageTruncatesOtherBodies(t *testing.T) {
	msg := ErrorMessage([]byte(strings.Repeat("x", 1000)))
	assert.Equal(t, strings.Repeat("x", maxMessage)+"...", msg)
	assert.Equal(t, "gone", ErrorMessage([]byte(`{"error": "gone"}`)))
	assert.Equal(t, `{"error": ""}`, ErrorMessage([]byte(`{"error": ""}`)), "an empty message says nothing; the body does")
}

func TestStatusErrorText(t *testing.T) {
	assert.Equal(t, "409 Conflict: stale", (&StatusError{Code: 409, Message: "stale"}).Error())
	assert.Equal(t, "503 Service Unavailable", (&StatusError{Code: 503}).Error())
}

func TestPostJSON(t *testing.T) {
	var gotType, gotMethod string
	var gotBody answer
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		gotType, gotMethod = r.Header.Get("Content-Type"), r.Method
		if err := DecodeBody(w, r, &gotBody, MaxRequestBytes); err != nil {
			Compact.Reject(w, err)
			return
		}
		if gotBody.N < 0 {
			Compact.WriteError(w, http.StatusConflict, "negative")
			return
		}
		Compact.WriteJSON(w, http.StatusOK, answer{N: gotBody.N * 2})
	}))
	defer srv.Close()
	c := NewClient(ClientOptions{})
	defer c.CloseIdleConnections()

	var out answer
	require.NoError(t, PostJSON(context.Background(), c, URL(c, srv.URL, "/x"), answer{N: 21}, &out))
	assert.Equal(t, answer{N: 42}, out)
	assert.Equal(t, "application/json", gotType)
	assert.Equal(t, http.MethodPost, gotMethod)

	err := PostJSON(context.Background(), c, URL(c, srv.URL, "/x"), answer{N: -1}, &out)
	var se *StatusError
	require.ErrorAs(t, err, &se)
	assert.Equal(t, StatusError{Code: http.StatusConflict, Message: "negative"}, *se)

	err = PostJSON(context.Background(), c, URL(c, srv.URL, "/x"), func() {}, &out)
	require.Error(t, err, "a value JSON cannot encode")
	assert.Contains(t, err.Error(), "encode request")
}

// request is a request to a server whose body is body.
func request(body string) (*httptest.ResponseRecorder, *http.Request) {
	return httptest.NewRecorder(), httptest.NewRequest(http.MethodPost, "/x", strings.NewReader(body))
}

func TestReadBody(t *testing.T) {
	w, r := request("12345678")
	b, err := ReadBody(w, r, 8)
	require.NoError(t, err)
	assert.Equal(t, "12345678", string(b))

	w, r = request("123456789")
	_, err = ReadBody(w, r, 8)
	var se *StatusError
	require.ErrorAs(t, err, &se)
	assert.Equal(t, StatusError{Code: http.StatusRequestEntityTooLarge, Message: "request body larger than 8 bytes"}, *se)
}

func TestDecodeBody(t *testing.T) {
	tests := []struct {
		name, body string
		code       int // 0: decoded
		msg        string
	}{
		{"object", `{"n": 1}`, 0, ""},
		{"blank after", "{\"n\": 1}\n  ", 0, ""},
		{"unknown field", `{"n": 1, "m": 2}`, 0, ""},
		{"empty", ``, 400, "empty request body: want a JSON object"},
		{"malformed", `{"n":`, 400, "malformed request body: unexpected EOF"},
		{"wrong type", `{"n":"x"}`, 400, "malformed request body: json: cannot unmarshal"},
		{"not an object", `[1]`, 400, "malformed request body: json: cannot unmarshal array"},
		{"trailing value", `{"n":1} {}`, 400, "malformed request body: unexpected data after the JSON body"},
		{"trailing garbage", `{"n":1} x`, 400, "malformed request body: invalid character 'x'"},
		{"too large", `{"n": 1}` + strings.Repeat(" ", 64), 413, "request body larger than 32 bytes"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w, r := request(tt.body)
			var got answer
			err := DecodeBody(w, r, &got, 32)
			if tt.code == 0 {
				require.NoError(t, err)
				assert.Equal(t, answer{N: 1}, got)
				return
			}
			var se *StatusError
			require.ErrorAs(t, err, &se)
			assert.Equal(t, tt.code, se.Code)
			assert.Contains(t, se.Message, tt.msg)
		})
	}
}

func TestFormats(t *testing.T) {
	w := httptest.NewRecorder()
	Compact.WriteJSON(w, http.StatusCreated, map[string]any{"id": "a", "n": 1})
	assert.Equal(t, http.StatusCreated, w.Code)
	assert.Equal(t, "application/json", w.Header().Get("Content-Type"))
	assert.Equal(t, `{"id":"a","n":1}`+"\n", w.Body.String())

	w = httptest.NewRecorder()
	Indented.WriteJSON(w, http.StatusOK, map[string]any{"id": "a", "n": 1})
	assert.Equal(t, "{\n  \"id\": \"a\",\n  \"n\": 1\n}\n", w.Body.String())

	w = httptest.NewRecorder()
	Compact.WriteJSON(w, http.StatusOK, map[string]any{"f": func() {}})
	assert.Equal(t, http.StatusInternalServerError, w.Code, "an answer JSON cannot encode")
	assert.Contains(t, w.Body.String(), "encode answer")
}

func TestReject(t *testing.T) {
	tests := []struct {
		err  error
		code int
		msg  string
	}{
		{&StatusError{Code: 413, Message: "too big"}, 413, "too big"},
		{errors.Join(errors.New("while reading"), &StatusError{Code: 400, Message: "bad"}), 400, "bad"},
		{errors.New("disk full"), 500, "disk full"},
	}
	for _, tt := range tests {
		w := httptest.NewRecorder()
		Indented.Reject(w, tt.err)
		assert.Equal(t, tt.code, w.Code)
		var e errorBody
		require.NoError(t, json.Unmarshal(w.Body.Bytes(), &e))
		assert.Equal(t, tt.msg, e.Error)
		assert.Equal(t, tt.msg, ErrorMessage(w.Body.Bytes()), "what a server writes, a client reads")
	}
}

// A client that declares a body over the limit and waits for "100
// Continue" before sending it gets the 413 at once, without the go-ahead.
func TestADeclaredLargeBodyGets413BeforeItIsSent(t *testing.T) {
	for _, read := range []func(http.ResponseWriter, *http.Request) error{
		func(w http.ResponseWriter, r *http.Request) error { _, err := ReadBody(w, r, 1024); return err },
		func(w http.ResponseWriter, r *http.Request) error { return DecodeBody(w, r, &answer{}, 1024) },
	} {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			var se *StatusError
			if err := read(w, r); errors.As(err, &se) {
				http.Error(w, se.Message, se.Code)
			}
		}))
		conn, err := net.Dial("tcp", srv.Listener.Addr().String())
		require.NoError(t, err)
		_, err = io.WriteString(conn, "PUT / HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 2000000\r\nExpect: 100-continue\r\n\r\n")
		require.NoError(t, err)
		resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
		require.NoError(t, err)
		require.Equal(t, http.StatusRequestEntityTooLarge, resp.StatusCode, "no 100 Continue first")
		conn.Close()
		srv.Close()
	}
}
