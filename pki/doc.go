// Package pki is jobmaster's small certificate authority: it creates a CA,
// issues the certificates of masters, executors and clients from it, writes
// them as PEM files, and reads back the identity a certificate carries.
//
// Vocabulary:
//   - role: what a certificate's holder is to the cluster: a server (a
//     master), an executor, or a client (a person or a tool using the API).
//   - identity: a role and a node id ("server" "m1"). For a client the id
//     names the user or tool.
//   - identity URI: how a certificate carries its identity, as its one URI
//     subject alternative name: jobmaster://<role>/<node id>, for example
//     jobmaster://server/m1. IdentityOf is the one function that reads it;
//     the subject's common name repeats it for people ("server m1") and is
//     never read.
//   - node certificate: a server's or an executor's. It is valid for TLS
//     servers and clients both (extended key usages server and client
//     auth), since nodes dial each other. A client certificate is valid for
//     TLS clients only.
//
// Every certificate covers 127.0.0.1, ::1 and localhost besides the
// addresses and names it is issued for, so that a node on loopback (dev,
// tests) needs nothing more. Keys are ECDSA P-256; key files are written
// with mode 0600 and never overwritten.
//
// The package uses only the standard library's crypto. Time and randomness
// come in as arguments (Request.Now, the rand reader), so that tests fix
// them; nothing here reads a clock of its own.
package pki
