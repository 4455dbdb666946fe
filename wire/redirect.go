package wire

import "net/http"

// WithoutRedirects returns a shallow copy of c (nil: http.DefaultClient)
// that answers a redirect as it is instead of following it. Every request
// of purrfly's services and tools carries a credential in a header: the
// internal secret, an admin key, a room's. net/http drops Authorization
// on a redirect to another host but copies every other header, so
// following a relay's or a balancer's 3xx would hand the credential to
// whatever host it names; as an answer, the 3xx is an error like any
// other status that is not success.
func WithoutRedirects(c *http.Client) *http.Client {
	if c == nil {
		c = http.DefaultClient
	}
	cc := *c
	cc.CheckRedirect = answerRedirect
	return &cc
}

func answerRedirect(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
