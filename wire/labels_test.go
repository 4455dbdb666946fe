package wire

import (
	"encoding/json"
	"maps"
	"strconv"
	"strings"
	"testing"
)

func TestParseLabels(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want map[string]string
	}{
		{"", nil},
		{"   ", nil},
		{"tier=pro", map[string]string{"tier": "pro"}},
		{"tier=pro, gpu=none ,zone=eu-1.a_b", map[string]string{"tier": "pro", "gpu": "none", "zone": "eu-1.a_b"}},
		{"Tier=PRO,tier=pro", map[string]string{"Tier": "PRO", "tier": "pro"}}, // case-sensitive
		{"9lives=yes", map[string]string{"9lives": "yes"}},
	} {
		got, err := ParseLabels(tc.in)
		if err != nil || !maps.Equal(got, tc.want) {
			t.Errorf("ParseLabels(%q) = %v, %v; want %v", tc.in, got, err, tc.want)
		}
	}
	many := make([]string, MaxLabels+1)
	for i := range many {
		many[i] = "k" + strconv.Itoa(i) + "=v"
	}
	for _, tc := range []struct{ in, why string }{
		{"tier", "is not key=value"},
		{"tier:pro", "is not key=value"},
		{"tier=pro,", "entry 2 is empty"},
		{",tier=pro", "entry 1 is empty"},
		{"=pro", "the key is empty"},
		{"tier=", "the value is empty"},
		{"-tier=pro", "must start with a letter or a digit"},
		{"ti er=pro", "only letters, digits"},
		{"tier=pro=max", "only letters, digits"},
		{"tier=pro!", "only letters, digits"},
		{"tier=pré", "only letters, digits"},
		{"tier=a,tier=b", `key "tier" is given twice`},
		{strings.Repeat("k", MaxLabelKeyLen+1) + "=v", "key is longer than 63"},
		{"k=" + strings.Repeat("v", MaxLabelValueLen+1), "value is longer than 63"},
		{strings.Join(many, ","), "at most 16"},
		{strings.Repeat("a", maxLabelsInputLen+1), "at most 4096 bytes"},
	} {
		got, err := ParseLabels(tc.in)
		if err == nil || !strings.Contains(err.Error(), tc.why) {
			t.Errorf("ParseLabels(%.60q) = %v, %v; want an error saying %q", tc.in, got, err, tc.why)
		}
		if err != nil && len(err.Error()) > 200 {
			t.Errorf("ParseLabels(%.60q): an error of %d bytes", tc.in, len(err.Error()))
		}
	}
	if _, err := ParseLabels(strings.Join(many[:MaxLabels], ",")); err != nil {
		t.Errorf("%d labels: %v", MaxLabels, err)
	}
}

func TestParseLabelSelector(t *testing.T) {
	got, err := ParseLabelSelector("tier:pro,zone:eu")
	if err != nil || !maps.Equal(got, map[string]string{"tier": "pro", "zone": "eu"}) {
		t.Fatalf("got %v, %v", got, err)
	}
	if _, err := ParseLabelSelector("tier=pro"); err == nil || !strings.Contains(err.Error(), "not key:value") {
		t.Fatalf("a relay's k=v form as a selector: %v", err)
	}
}

func TestHasLabels(t *testing.T) {
	have := map[string]string{"tier": "pro", "zone": "eu"}
	for _, tc := range []struct {
		want map[string]string
		ok   bool
	}{
		{nil, true},
		{map[string]string{"tier": "pro"}, true},
		{map[string]string{"tier": "pro", "zone": "eu"}, true},
		{map[string]string{"tier": "free"}, false},
		{map[string]string{"gpu": "yes"}, false},
	} {
		if got := HasLabels(have, tc.want); got != tc.ok {
			t.Errorf("HasLabels(%v, %v) = %v", have, tc.want, got)
		}
	}
	if HasLabels(nil, map[string]string{"tier": "pro"}) {
		t.Error("a relay without labels matched a label")
	}
}

// An older relay omits labels and capacity; a newer one's JSON round-trips.
func TestRelayInfoLabelsCapacityJSON(t *testing.T) {
	b, _ := json.Marshal(RelayInfo{BootID: "b"})
	if strings.Contains(string(b), "labels") || strings.Contains(string(b), "capacity") {
		t.Fatalf("no labels, no capacity: %s", b)
	}
	in := RelayInfo{BootID: "b", Labels: map[string]string{"tier": "pro"}, Capacity: Capacity{MaxRooms: 50}}
	b, _ = json.Marshal(in)
	if !strings.Contains(string(b), `"labels":{"tier":"pro"}`) || !strings.Contains(string(b), `"capacity":{"maxRooms":50}`) {
		t.Fatalf("encoded %s", b)
	}
	var out RelayInfo
	if err := json.Unmarshal(b, &out); err != nil || !maps.Equal(out.Labels, in.Labels) || out.Capacity != in.Capacity {
		t.Fatalf("decoded %+v, %v", out, err)
	}
	if (Capacity{MaxRooms: -1}).Validate() == nil || (Capacity{}).Validate() != nil {
		t.Fatal("Capacity.Validate")
	}
}
