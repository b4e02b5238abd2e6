package transport

import "net/http"

// RoleHeader names, on every answer of a node's HTTP API, the role of the
// node that answered: a client given an executor's address for a master's
// can tell that it must try another address.
const RoleHeader = "X-Jobmaster-Role"

// Roles a RoleHeader names.
const (
	RoleMaster   = "master"
	RoleExecutor = "executor"
)

// Role sets RoleHeader to role on every answer of h.
func Role(role string, h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set(RoleHeader, role)
		h.ServeHTTP(w, r)
	})
}
