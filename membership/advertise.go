package membership

import (
	"fmt"
	"net"
)

// Advertise returns the address others should use to reach a listener
// bound to addr: addr itself, unless its host is unspecified (0.0.0.0, ::
// or empty), in which case the host's first non-loopback IPv4 address (or
// IPv6, if it has no IPv4) takes its place, as Consul and Nomad do.
func Advertise(addr string) (string, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return "", fmt.Errorf("address %q: %w", addr, err)
	}
	if host != "" {
		if ip := net.ParseIP(host); ip == nil || !ip.IsUnspecified() {
			return addr, nil
		}
	}
	ip, err := privateIP()
	if err != nil {
		return "", fmt.Errorf("address %q listens on every interface, and no address to advertise was found: %w", addr, err)
	}
	return net.JoinHostPort(ip.String(), port), nil
}

// privateIP is the first non-loopback unicast address of an interface that
// is up, IPv4 first.
func privateIP() (net.IP, error) {
	ifaces, err := net.Interfaces()
	if err != nil {
		return nil, err
	}
	var v6 net.IP
	for _, ifc := range ifaces {
		if ifc.Flags&net.FlagUp == 0 || ifc.Flags&net.FlagLoopback != 0 {
			continue
		}
		addrs, err := ifc.Addrs()
		if err != nil {
			continue
		}
		for _, a := range addrs {
			ipn, ok := a.(*net.IPNet)
			if !ok || !ipn.IP.IsGlobalUnicast() {
				continue
			}
			if v4 := ipn.IP.To4(); v4 != nil {
				return v4, nil
			}
			if v6 == nil {
				v6 = ipn.IP
			}
		}
	}
	if v6 != nil {
		return v6, nil
	}
	return nil, fmt.Errorf("no network interface with a non-loopback address is up")
}
