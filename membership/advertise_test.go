package membership

import (
	"net"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestAdvertise(t *testing.T) {
	a, err := Advertise("127.0.0.1:7401")
	require.NoError(t, err)
	require.Equal(t, "127.0.0.1:7401", a, "a specific address is kept")
	a, err = Advertise("myhost:7401")
	require.NoError(t, err)
	require.Equal(t, "myhost:7401", a)
	_, err = Advertise("no-port")
	require.Error(t, err)
	for _, unspecified := range []string{"0.0.0.0:7401", "[::]:7401", ":7401"} {
		a, err := Advertise(unspecified)
		if err != nil {
			t.Skipf("this machine has no non-loopback address: %v", err)
		}
		host, port, err := net.SplitHostPort(a)
		require.NoError(t, err)
		require.Equal(t, "7401", port)
		ip := net.ParseIP(host)
		require.NotNil(t, ip, a)
		require.False(t, ip.IsUnspecified() || ip.IsLoopback(), "%s advertises %s", unspecified, a)
	}
}
