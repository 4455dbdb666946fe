package flysim

import (
	"time"

	fly "github.com/superfly/fly-go"
)

// DefaultRestartMaxRetries is max_retries of an on-failure policy that
// sets none.
const DefaultRestartMaxRetries = 10

// Restart back-off: the first automatic restart waits restartBackoff, each
// further one twice as long, up to maxRestartBackoff, so a crash loop of
// policy "always" cannot spin.
const (
	restartBackoff    = 100 * time.Millisecond
	maxRestartBackoff = 5 * time.Second
)

// restartDelay decides, for a process of m that exited without being asked
// to (code, sig as exitStatus reports them), whether the machine's restart
// policy starts it again and after how long. retries is the number of
// automatic restarts since the last requested start. A config without a
// restart policy gets the platform's default (Platform.DefaultRestart:
// on-failure on Fly, none in a kind Sim, which then behaves as "no").
func (s *Sim) restartDelay(m *machine, code, sig, retries int) (time.Duration, bool) {
	s.mu.Lock()
	var r *fly.MachineRestart
	if m.config != nil {
		r = m.config.Restart
	}
	s.mu.Unlock()
	if r == nil {
		r = s.cfg.Platform.defaultRestart()
	}
	if r == nil {
		return 0, false
	}
	failed := code != 0 || sig != 0
	switch r.Policy {
	case fly.MachineRestartPolicyAlways:
	case fly.MachineRestartPolicyOnFailure:
		maxRetries := r.MaxRetries
		if maxRetries <= 0 {
			maxRetries = DefaultRestartMaxRetries
		}
		if !failed || retries >= maxRetries {
			return 0, false
		}
	default:
		return 0, false
	}
	d := restartBackoff << min(retries, 10)
	return min(d, maxRestartBackoff), true
}
