package main

import (
	"fmt"
	"strings"
)

// describeDevUI tells where the dev cluster's web UI is and how to sign
// in: every master serves it over HTTPS, with certificates of the
// cluster's own CA, and it asks for a token (the management token here).
func describeDevUI(masters []string, sec *devSecurity) string {
	var b strings.Builder
	fmt.Fprintf(&b, "\nWeb UI: https://%s/ui/\n", masters[0])
	if len(masters) > 1 {
		others := make([]string, 0, len(masters)-1)
		for _, m := range masters[1:] {
			others = append(others, "https://"+m+"/ui/")
		}
		fmt.Fprintf(&b, "  (every master serves it: %s)\n", strings.Join(others, ", "))
	}
	fmt.Fprintf(&b, "  Sign in with the management token %s (it is in %s).\n", sec.token, sec.tokenFile)
	fmt.Fprintf(&b, "  The masters' certificates come from this cluster's own CA, %s: a browser warns\n", sec.client.CA)
	b.WriteString("  until you trust that CA (import it as an authority) or accept each master's certificate;\n")
	b.WriteString("  after a failover the page reads the other masters, which needs them trusted too.\n")
	return b.String()
}
