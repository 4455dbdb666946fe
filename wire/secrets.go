package wire

import "strings"

// MaxSecrets is how many values SECRET may list at once: the one in use
// and those being rotated in or out.
const MaxSecrets = 4

// SECRET, the credential relays, the balancer and the deploy tool share, is
// a comma-separated list so that it can rotate without an outage: every
// service sends the first value and accepts any of them. A rotation from
// old to new sets "old,new" everywhere, then "new,old", then "new", each
// step deployed in full before the next: at every moment, what any
// service sends is accepted by every other, whichever step it runs.
// README.md has the commands. A list of one value is a plain SECRET.

// ValidSecretList reports whether s can serve as SECRET: 1 to MaxSecrets
// comma-separated values, each ValidSecret.
func ValidSecretList(s string) bool {
	parts := strings.Split(s, ",")
	if len(parts) > MaxSecrets {
		return false
	}
	for _, p := range parts {
		if !ValidSecret(p) {
			return false
		}
	}
	return true
}

// SendSecret is the value of the SECRET list s that a service sends: the
// first.
func SendSecret(s string) string {
	first, _, _ := strings.Cut(s, ",")
	return first
}

// SecretIn reports whether got is one of the SECRET list s, comparing with
// every value in constant time (SecretEqual), so that neither which value
// matched nor how many there are leaks through timing beyond the list's
// length. An empty got matches nothing.
func SecretIn(got, s string) bool {
	ok := false
	if got == "" {
		return false
	}
	for rest := s; ; {
		v, more, found := strings.Cut(rest, ",")
		if SecretEqual(got, v) {
			ok = true
		}
		if !found {
			break
		}
		rest = more
	}
	return ok
}
