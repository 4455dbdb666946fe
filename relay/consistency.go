package relay

// ConsistencyCheck verifies the invariants that tie the relay's rooms and
// connections together (core.Core.ConsistencyCheck lists them), and that
// no room phase transition was ever refused. It is meant for tests and
// debugging: it takes every room lock in turn, so call it on a quiet
// relay for an exact answer.
func (s *Server) ConsistencyCheck() error { return s.core.ConsistencyCheck() }
