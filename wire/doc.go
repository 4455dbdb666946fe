// Package wire is the PurrNet relay protocol and purrfly's HTTP contract, written
// once and shared by the relay, the balancer and the Go client.
//
// It holds, and nothing else:
//   - the WebSocket frame layouts of PurrNet's PurrTransport (frames.go): every
//     integer is a 32-bit little-endian value; binary messages only; 65,535 bytes
//     at most per message;
//   - the authentication JSON that opens every relay connection (auth.go);
//   - the header names clients, tools and services send (headers.go), each
//     canonicalized once for reading and setting (headerkeys.go);
//   - the JSON bodies of the public balancer API and of the internal
//     relay<->balancer protocol (api.go, internal.go), read and written by
//     encoding/json;
//   - the error shape {"code","error","retryable"} with its HTTP status, and the
//     middleware that puts the no-store and CORS headers on every answer
//     (errors.go, middleware.go);
//   - SessionID, the key that session affinity hashes, and RouteResult, where
//     a session is served (session.go).
//
// The package imports the standard library only. Decoders never trust their
// input: every size is bounded and every failure is an *Error with a code.
package wire
