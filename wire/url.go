package wire

import "net/url"

// ParseHTTPURL parses s as an absolute http or https URL with a host, the
// only form purrfly accepts for a service's address (balancer, relay
// endpoints, the Machines API). ok is false for anything else; u is nil
// when s does not parse at all.
func ParseHTTPURL(s string) (u *url.URL, ok bool) {
	u, err := url.Parse(s)
	if err != nil {
		return nil, false
	}
	return u, (u.Scheme == "http" || u.Scheme == "https") && u.Host != ""
}
