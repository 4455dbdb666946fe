// Package wstest has the WebSocket helpers that the relay's test packages
// share: a reader of raw frames that unmasks by the RFC's definition,
// independent of the relay's own frame code (ReadRawFrame), and a masked
// client frame written by hand (MaskedFrame). It is for tests only (like
// internal/testutil): no production package imports it.
package wstest
