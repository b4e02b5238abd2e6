package api

// TokenHeader carries a request's ACL token secret; "Authorization:
// Bearer SECRET" does too.
const TokenHeader = "X-Jobmaster-Token"

// ACLToken is a token document: it answers POST /v1/acl/bootstrap and POST
// /v1/acl/tokens (with its secret, the only time the secret is shown), and
// is an entry of GET /v1/acl/tokens (without it).
type ACLToken struct {
	AccessorID string `json:"accessor_id"`
	SecretID   string `json:"secret_id,omitempty"`
	Name       string `json:"name"`
	Policy     string `json:"policy"`
}

// ACLTokenRequest is the body of POST /v1/acl/tokens. SecretID is
// optional: a secret chosen by the caller (16 to 128 characters of letters,
// digits and -._~+/=); without it the master generates one. A request
// repeated with the same secret, name and policy creates nothing more and
// answers with the same token.
type ACLTokenRequest struct {
	Name     string `json:"name"`
	Policy   string `json:"policy"`
	SecretID string `json:"secret_id,omitempty"`
}

// ACLBootstrapRequest is the optional body of POST /v1/acl/bootstrap: a
// secret chosen by the caller for the management token, as in
// ACLTokenRequest.
type ACLBootstrapRequest struct {
	SecretID string `json:"secret_id,omitempty"`
}

// ACLTokenList answers GET /v1/acl/tokens: every token, oldest first,
// never with its secret.
type ACLTokenList struct {
	Tokens []ACLToken `json:"tokens"`
}

// ACLTokenDeleted answers DELETE /v1/acl/tokens/{accessor}.
type ACLTokenDeleted struct {
	Deleted string `json:"deleted"`
}
