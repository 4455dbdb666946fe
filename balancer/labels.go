package balancer

import (
	"github.com/purrfly/purrfly/wire"
)

// Bounds of the label filters of GET /v1/rooms (?label=k:v, repeatable,
// all must match).
const (
	maxLabelFilters = 16
	maxLabelKeyLen  = 63
	maxLabelValLen  = 63
)

// labelFilter is one ?label=key:value.
type labelFilter struct{ key, value string }

// parseLabelFilter reads "key:value": a key of 1 to 63 characters of
// [A-Za-z0-9._/-] starting with a letter or digit, a value of at most 63
// characters of [A-Za-z0-9._-] (it may be empty).
func parseLabelFilter(s string) (labelFilter, error) {
	bad := wire.ErrBadRequest.WithMessage("label must be key:value (key [A-Za-z0-9._/-]{1,63}, value [A-Za-z0-9._-]{0,63})")
	i := -1
	for j := 0; j < len(s); j++ {
		if s[j] == ':' {
			i = j
			break
		}
	}
	if i < 1 || i > maxLabelKeyLen || len(s)-i-1 > maxLabelValLen {
		return labelFilter{}, bad
	}
	key, val := s[:i], s[i+1:]
	if !alnum(key[0]) {
		return labelFilter{}, bad
	}
	for j := 0; j < len(key); j++ {
		if c := key[j]; !alnum(c) && c != '.' && c != '_' && c != '-' && c != '/' {
			return labelFilter{}, bad
		}
	}
	for j := 0; j < len(val); j++ {
		if c := val[j]; !alnum(c) && c != '.' && c != '_' && c != '-' {
			return labelFilter{}, bad
		}
	}
	return labelFilter{key: key, value: val}, nil
}

func alnum(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
}

// parseLabelFilters reads every ?label= value.
func parseLabelFilters(vals []string) ([]labelFilter, error) {
	if len(vals) > maxLabelFilters {
		return nil, wire.ErrBadRequest.WithMessage("at most 16 label filters")
	}
	out := make([]labelFilter, 0, len(vals))
	for _, v := range vals {
		f, err := parseLabelFilter(v)
		if err != nil {
			return nil, err
		}
		out = append(out, f)
	}
	return out, nil
}

// matchLabels reports whether labels carry every filter's key with its
// value.
func matchLabels(labels map[string]string, fs []labelFilter) bool {
	for _, f := range fs {
		if v, ok := labels[f.key]; !ok || v != f.value {
			return false
		}
	}
	return true
}

// relayLabels are the labels a relay reports. Relays report none yet
// (placement adds them to wire.RelayInfo); a label filter then matches no
// room. When RelayInfo carries labels, return them here.
func relayLabels(wire.RelayInfo) map[string]string { return nil }
