package transport

import (
	"errors"
	"net/http"
	"strings"
	"testing"
)

func TestURL(t *testing.T) {
	tests := []struct{ addr, path, want string }{
		{"127.0.0.1:7401", "/v1/jobs", "http://127.0.0.1:7401/v1/jobs"},
		{"[::1]:7401", "/v1/health", "http://[::1]:7401/v1/health"},
		{"http://127.0.0.1:7401", "/v1/jobs?stale", "http://127.0.0.1:7401/v1/jobs?stale"},
		{"http://127.0.0.1:7401/", "/v1/jobs", "http://127.0.0.1:7401/v1/jobs"},
		{"https://m1:7401", "/v1/jobs", "https://m1:7401/v1/jobs"},
		{"m1:7401", "", "http://m1:7401"},
	}
	for _, tt := range tests {
		if got := URL(http.DefaultClient, tt.addr, tt.path); got != tt.want {
			t.Errorf("URL(%q, %q) = %q, want %q", tt.addr, tt.path, got, tt.want)
		}
	}
}

func TestHostPort(t *testing.T) {
	tests := []struct{ addr, want string }{
		{"127.0.0.1:7401", "127.0.0.1:7401"},
		{"http://127.0.0.1:7401", "127.0.0.1:7401"},
		{"http://[::1]:7401/", "[::1]:7401"},
		{"https://m1:7401", "m1:7401"},
	}
	for _, tt := range tests {
		if got := HostPort(tt.addr); got != tt.want {
			t.Errorf("HostPort(%q) = %q, want %q", tt.addr, got, tt.want)
		}
		if got := HostPort(BaseURL(http.DefaultClient, tt.addr)); got != tt.want {
			t.Errorf("HostPort(BaseURL(%q)) = %q, want %q", tt.addr, got, tt.want)
		}
	}
}

func TestSchemeFollowsTheClient(t *testing.T) {
	plain := NewClient(ClientOptions{})
	if got := Scheme(plain); got != "http" {
		t.Errorf("Scheme(plain) = %q", got)
	}
	if got := Scheme(http.DefaultClient); got != "http" {
		t.Errorf("Scheme(http.DefaultClient) = %q", got)
	}
	withTLS := NewClient(ClientOptions{TLS: &TLS{cur: &material{}}})
	if got := Scheme(withTLS); got != "https" {
		t.Errorf("Scheme(TLS) = %q", got)
	}
	tests := []struct{ addr, want string }{
		{"127.0.0.1:7401", "https://127.0.0.1:7401/v1/jobs"},
		{"http://127.0.0.1:7401", "http://127.0.0.1:7401/v1/jobs"}, // an explicit scheme is kept
		{"https://m1:7401/", "https://m1:7401/v1/jobs"},
	}
	for _, tt := range tests {
		if got := URL(withTLS, tt.addr, "/v1/jobs"); got != tt.want {
			t.Errorf("URL(TLS, %q) = %q, want %q", tt.addr, got, tt.want)
		}
	}
}

// An address a peer gives is host:port and nothing more: a scheme in it
// would choose how a TLS node dials it (in the clear), so PeerURL refuses
// it where URL, for a user's address, keeps it.
func TestPeerURLTakesNoSchemeFromThePeer(t *testing.T) {
	withTLS := NewClient(ClientOptions{TLS: &TLS{cur: &material{}}})
	good := []struct{ addr, want string }{
		{"127.0.0.1:7431", "https://127.0.0.1:7431/v1/internal/heartbeat"},
		{"[::1]:7431", "https://[::1]:7431/v1/internal/heartbeat"},
		{"[2001:db8::1]:7431", "https://[2001:db8::1]:7431/v1/internal/heartbeat"},
		{"exec-1.example_net:7431", "https://exec-1.example_net:7431/v1/internal/heartbeat"},
		{"0.0.0.0:7431", "https://0.0.0.0:7431/v1/internal/heartbeat"},
		{":7431", "https://:7431/v1/internal/heartbeat"},
		{"10.0.0.1:65535", "https://10.0.0.1:65535/v1/internal/heartbeat"},
	}
	for _, tt := range good {
		got, err := PeerURL(withTLS, tt.addr, heartbeatPath)
		if err != nil || got != tt.want {
			t.Errorf("PeerURL(TLS, %q) = %q, %v; want %q", tt.addr, got, err, tt.want)
		}
	}
	bad := []string{
		"http://127.0.0.1:21099", "https://127.0.0.1:21099", "http://127.0.0.1:21099/",
		"127.0.0.1", "127.0.0.1:", "127.0.0.1:0", "127.0.0.1:65536", "127.0.0.1:+80", "127.0.0.1:http",
		"user@127.0.0.1:80", "127.0.0.1:80/path", "host name:80", "127.0.0.1:80 ", "[fe80::1%eth0]:80",
		"h?x:80", "h#x:80", "",
	}
	for _, addr := range bad {
		if got, err := PeerURL(withTLS, addr, heartbeatPath); !errors.Is(err, ErrPeerAddress) {
			t.Errorf("PeerURL(TLS, %q) = %q, %v; want ErrPeerAddress", addr, got, err)
		}
	}
	if _, err := PeerURL(withTLS, "http://127.0.0.1:21099", "/x"); err == nil || !strings.Contains(err.Error(), "carries a scheme") {
		t.Errorf("the error names the scheme: %v", err)
	}
}

const heartbeatPath = "/v1/internal/heartbeat"
