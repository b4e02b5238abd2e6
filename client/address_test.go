package client

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestParseAddresses(t *testing.T) {
	tests := []struct {
		in      string
		want    []string
		wantErr string
	}{
		{in: "127.0.0.1:7401", want: []string{"http://127.0.0.1:7401"}},
		{in: "http://127.0.0.1:7401", want: []string{"http://127.0.0.1:7401"}},
		{in: "http://127.0.0.1:7401/", want: []string{"http://127.0.0.1:7401"}},
		{in: "localhost:1, http://m2:2 ,m3:65535", want: []string{"http://localhost:1", "http://m2:2", "http://m3:65535"}},
		{in: "[::1]:7401", want: []string{"http://[::1]:7401"}},
		{in: "http://[::1]:7401", want: []string{"http://[::1]:7401"}},
		{in: "a:1,,a:1,", want: []string{"http://a:1"}},
		{in: "", wantErr: "no master address given"},
		{in: " , ", wantErr: "no master address given"},
		{in: "127.0.0.1", wantErr: `invalid address "127.0.0.1": expected host:port`},
		{in: "a:1,b", wantErr: `invalid address "b"`},
		{in: ":7401", wantErr: "missing or malformed host"},
		{in: "a:0", wantErr: "not a number between 1 and 65535"},
		{in: "a:70000", wantErr: "not a number between 1 and 65535"},
		{in: "a:http", wantErr: "not a number between 1 and 65535"},
		{in: "https://a:1", want: []string{"https://a:1"}},
		{in: "https://a:1/,b:2", want: []string{"https://a:1", "http://b:2"}},
		{in: "tcp://a:1", wantErr: `scheme "tcp" is not supported`},
		{in: "http://a:1/v1", wantErr: "nothing after the port"},
		{in: "http://a:1?x=1", wantErr: "nothing after the port"},
		{in: "http://u@a:1", wantErr: "nothing after the port"},
		{in: "http://a", wantErr: "expected host:port"},
		{in: "a b:1", wantErr: "malformed host"},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := ParseAddresses(tt.in)
			if tt.wantErr != "" {
				require.Error(t, err)
				assert.Contains(t, err.Error(), tt.wantErr)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.want, got)
		})
	}
}

func TestNewRejectsBadAddresses(t *testing.T) {
	_, err := New("localhost")
	require.Error(t, err)
	assert.Contains(t, err.Error(), "host:port")
}
