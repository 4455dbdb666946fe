package wire

import (
	"errors"
	"fmt"
	"slices"
	"strings"
)

// Labels and capacity: what an operator says about a relay so that the
// balancer's placement can be shaped (added within version 2, in
// RelayInfo: an older balancer ignores them, an older relay omits them,
// which means no label and no stated capacity).
//
// A label is key=value. Keys start with a letter or digit and hold
// letters, digits, '.', '_' and '-' (at most MaxLabelKeyLen bytes);
// values hold the same characters (1 to MaxLabelValueLen bytes). Both are
// case-sensitive. A relay carries at most MaxLabels of them. A relay
// writes them RELAY_LABELS=k=v,k2=v2 (ParseLabels); an allocation asks
// for some as labels=k:v,k2:v2 (ParseLabelSelector), the form the admin
// API's ?label=k:v filter uses too.

// Label bounds.
const (
	MaxLabels        = 16
	MaxLabelKeyLen   = 63
	MaxLabelValueLen = 63
	// maxLabelsInputLen bounds the text a label list is parsed from:
	// MaxLabels pairs at their longest, their separators, and some spaces.
	maxLabelsInputLen = 4096
)

// Capacity is what a relay takes at most (0: no limit). A relay that
// holds MaxRooms rooms, or MaxConnections connections, is full: no new
// room is placed on it (its rooms keep their players, and players keep
// joining them).
type Capacity struct {
	MaxRooms       int `json:"maxRooms,omitempty"`
	MaxConnections int `json:"maxConnections,omitempty"`
}

// Validate checks that neither bound is negative.
func (c Capacity) Validate() error {
	if c.MaxRooms < 0 || c.MaxConnections < 0 {
		return errors.New("capacity must not be negative (0 means no limit)")
	}
	return nil
}

// ParseLabels parses a relay's labels, "k=v,k2=v2" (RELAY_LABELS). Spaces
// around a pair are ignored; an empty string is no label (nil). Errors
// say which pair is wrong and why.
func ParseLabels(s string) (map[string]string, error) { return parseLabels(s, '=') }

// ParseLabelSelector parses the labels an allocation requires, "k:v,k2:v2"
// (the labels query parameter of POST /allocate_ws). Same rules as
// ParseLabels with ':' between key and value.
func ParseLabelSelector(s string) (map[string]string, error) { return parseLabels(s, ':') }

func parseLabels(s string, sep byte) (map[string]string, error) {
	if len(s) > maxLabelsInputLen {
		return nil, fmt.Errorf("labels: at most %d bytes", maxLabelsInputLen)
	}
	if strings.TrimSpace(s) == "" {
		return nil, nil
	}
	out := make(map[string]string)
	for i, pair := range strings.Split(s, ",") {
		pair = strings.TrimSpace(pair)
		if pair == "" {
			return nil, fmt.Errorf("labels: entry %d is empty (a stray comma?)", i+1)
		}
		k, v, ok := strings.Cut(pair, string(sep))
		if !ok {
			return nil, fmt.Errorf("labels: entry %d (%s) is not key%cvalue", i+1, quoteShort(pair), sep)
		}
		if err := validLabel(k, v); err != nil {
			return nil, fmt.Errorf("labels: entry %d (%s): %w", i+1, quoteShort(pair), err)
		}
		if _, dup := out[k]; dup {
			return nil, fmt.Errorf("labels: key %q is given twice", k)
		}
		if len(out) == MaxLabels {
			return nil, fmt.Errorf("labels: at most %d", MaxLabels)
		}
		out[k] = v
	}
	return out, nil
}

// ValidateLabels checks labels that did not come through a parser (a
// registration's, a Go caller's placement).
func ValidateLabels(m map[string]string) error {
	if len(m) > MaxLabels {
		return fmt.Errorf("labels: at most %d", MaxLabels)
	}
	for k, v := range m {
		if err := validLabel(k, v); err != nil {
			return fmt.Errorf("labels: %s: %w", quoteShort(k), err)
		}
	}
	return nil
}

func validLabel(k, v string) error {
	switch {
	case k == "":
		return errors.New("the key is empty")
	case len(k) > MaxLabelKeyLen:
		return fmt.Errorf("the key is longer than %d bytes", MaxLabelKeyLen)
	case !isAlnum(k[0]):
		return errors.New("the key must start with a letter or a digit")
	case !labelChars(k):
		return errors.New("the key may hold only letters, digits, '.', '_' and '-'")
	case v == "":
		return errors.New("the value is empty")
	case len(v) > MaxLabelValueLen:
		return fmt.Errorf("the value is longer than %d bytes", MaxLabelValueLen)
	case !labelChars(v):
		return errors.New("the value may hold only letters, digits, '.', '_' and '-'")
	}
	return nil
}

func isAlnum(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
}

func labelChars(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; !isAlnum(c) && c != '.' && c != '_' && c != '-' {
			return false
		}
	}
	return true
}

// quoteShort quotes s for an error message, cut to 40 bytes.
func quoteShort(s string) string {
	if len(s) > 40 {
		return fmt.Sprintf("%q...", s[:40])
	}
	return fmt.Sprintf("%q", s)
}

// HasLabels reports whether have carries every label of want with the
// same value (no want: true).
func HasLabels(have, want map[string]string) bool {
	for k, v := range want {
		if hv, ok := have[k]; !ok || hv != v {
			return false
		}
	}
	return true
}

// FormatLabels writes labels as "k=v,k2=v2" in key order (sep between key
// and value), the form ParseLabels (or, with ':', ParseLabelSelector)
// reads back.
func FormatLabels(m map[string]string, sep byte) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	var b strings.Builder
	for i, k := range keys {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(k)
		b.WriteByte(sep)
		b.WriteString(m[k])
	}
	return b.String()
}
