package wire

import "testing"

// A status a balancer might answer that this build does not know is
// labelled "unknown": the relay's publication and removal metrics then
// have a fixed set of series, whatever the balancer sends.
func TestStatusLabelsAreBounded(t *testing.T) {
	for _, s := range []PublicationStatus{PubApplied, PubCurrent, PubConflict, PubFenced, PubRejected} {
		if s.Label() != string(s) {
			t.Errorf("%q labelled %q", s, s.Label())
		}
	}
	for _, s := range []RemovalStatus{RemApplied, RemAlready, RemSuperseded, RemRetry} {
		if s.Label() != string(s) {
			t.Errorf("%q labelled %q", s, s.Label())
		}
	}
	if got := PublicationStatus("x-1234").Label(); got != "unknown" {
		t.Errorf("an unknown publication status labelled %q", got)
	}
	if got := RemovalStatus("").Label(); got != "unknown" {
		t.Errorf("an empty removal status labelled %q", got)
	}
}
