package transport

import (
	"net/http"
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
