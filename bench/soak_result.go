package bench

// SoakResult is the connection soak's report (Result.Soak).
type SoakResult struct {
	Rounds     int     `json:"rounds"`
	TimeoutSec float64 `json:"timeout_sec"` // the relay child's authentication and header timeouts
	Seconds    float64 `json:"seconds"`     // the whole soak
	// Before is the relay's level once registered, before any round;
	// Settled the level the first round settled at, the reference of the
	// later rounds (the first allocations open the balancer's kept-alive
	// connections to the relay, which stay).
	Before  Level       `json:"before"`
	Settled Level       `json:"settled"`
	Round   []SoakRound `json:"round"`
	// Totals over the rounds.
	Opened          int     `json:"opened"`
	Refused         int     `json:"refused"`          // upgrades the relay refused (its bounds)
	NotClosed       int     `json:"not_closed"`       // connections the relay had to close and did not, in time
	Errors          int     `json:"errors"`           // connections that failed where they should not
	GoroutineGrowth int     `json:"goroutine_growth"` // the largest of the rounds'
	FDGrowth        int     `json:"fd_growth"`        // the largest of the rounds'
	MaxCloseSec     float64 `json:"max_close_sec"`    // the slowest close by the relay
}

// Level is a process's goroutines and open file descriptors.
type Level struct {
	Goroutines int `json:"goroutines"`
	FDs        int `json:"fds"`
}

// SoakRound is one round: what was opened, by kind, and how it ended.
type SoakRound struct {
	Opened map[string]int `json:"opened"` // by kind (soakKinds)
	// ClosedByRelay is the connections of the kinds the relay must close
	// that it closed within TimeoutSec plus the grace; NotClosed those it
	// did not (each a failure); MaxCloseSec the slowest of them.
	ClosedByRelay int     `json:"closed_by_relay"`
	NotClosed     int     `json:"not_closed"`
	MaxCloseSec   float64 `json:"max_close_sec"`
	Refused       int     `json:"refused"`
	Errors        int     `json:"errors"`
	FirstError    string  `json:"first_error,omitempty"`
	Played        int     `json:"played"` // clients whose message reached their host and back
	Settled       Level   `json:"settled"`
	SettleSec     float64 `json:"settle_sec"`
	// Growth above the first round's settled level (0 in the first).
	GoroutineGrowth int `json:"goroutine_growth"`
	FDGrowth        int `json:"fd_growth"`
}

// total fills the totals from the rounds.
func (s *SoakResult) total() {
	for _, r := range s.Round {
		for _, n := range r.Opened {
			s.Opened += n
		}
		s.Refused += r.Refused
		s.NotClosed += r.NotClosed
		s.Errors += r.Errors
		s.GoroutineGrowth = max(s.GoroutineGrowth, r.GoroutineGrowth)
		s.FDGrowth = max(s.FDGrowth, r.FDGrowth)
		s.MaxCloseSec = max(s.MaxCloseSec, r.MaxCloseSec)
	}
}

// Clean reports whether the soak saw nothing wrong: no growth, every
// connection the relay had to close closed in time, no unexpected error.
func (s *SoakResult) Clean() bool {
	return s.GoroutineGrowth == 0 && s.FDGrowth == 0 && s.NotClosed == 0 && s.Errors == 0
}
