package flyconfig

import (
	"encoding/json"
	"fmt"
	"reflect"
	"regexp"
	"slices"
	"strings"

	fly "github.com/superfly/fly-go"
)

// Managed are the machine config fields (JSON names) a fly.toml decides;
// a deploy replaces them and keeps every other field of the live config.
var Managed = []string{"image", "env", "init", "guest", "metadata", "services", "metrics", "checks", "stop_config", "restart"}

// Merge returns live with every managed field taken from desired. live is
// not modified; a nil live gives a copy of desired.
func Merge(live, desired *fly.MachineConfig) *fly.MachineConfig {
	var out fly.MachineConfig
	if live != nil {
		out = *clone(live)
	}
	d := clone(desired)
	out.Image, out.Env, out.Init, out.Guest = d.Image, d.Env, d.Init, d.Guest
	out.Services, out.Metrics, out.Checks = d.Services, d.Metrics, d.Checks
	out.StopConfig, out.Restart = d.StopConfig, d.Restart
	// Metadata keeps the platform's own keys (fly_platform_version, ...):
	// only the ones the toml sets are replaced.
	if len(d.Metadata) > 0 && out.Metadata == nil {
		out.Metadata = map[string]string{}
	}
	for k, v := range d.Metadata {
		out.Metadata[k] = v
	}
	return &out
}

func clone(c *fly.MachineConfig) *fly.MachineConfig {
	b, err := json.Marshal(c)
	if err != nil {
		panic(fmt.Sprintf("flyconfig: machine config does not marshal: %v", err))
	}
	var out fly.MachineConfig
	if err := json.Unmarshal(b, &out); err != nil {
		panic(fmt.Sprintf("flyconfig: machine config does not round-trip: %v", err))
	}
	return &out
}

// Change is one difference between two machine configs.
type Change struct {
	// Path names the field: "env.LOG_LEVEL", "services[0].concurrency.soft_limit".
	Path string `json:"path"`
	// From and To are the JSON values before and after ("" when absent).
	From string `json:"from"`
	To   string `json:"to"`
}

func (c Change) String() string {
	switch {
	case c.From == "":
		return c.Path + ": + " + c.To
	case c.To == "":
		return c.Path + ": - " + c.From
	}
	return c.Path + ": " + c.From + " -> " + c.To
}

// Diff lists the managed fields in which desired differs from live, in
// path order (map keys sorted, list items by index).
//
// What the toml sets is compared exactly: a value the live config lacks
// is a change even when it is a zero (auto_start_machines = false is not
// Fly's default, absent). What only the live config has is a change in
// env (a key the toml dropped) and among the named checks (a check the
// toml dropped); anywhere else it is the platform's own (a default it
// filled in, a field it added) and not a change, or every rollout would
// redeploy an unchanged fleet. Metadata is compared on desired's keys.
func Diff(live, desired *fly.MachineConfig) []Change {
	a, b := managedTree(live, desired), managedTree(desired, desired)
	var out []Change
	walk("", a, b, strictTop, &out)
	return out
}

// strictness says where keys only the live config has count.
type strictness int

const (
	lenient   strictness = iota // extra live keys are the platform's
	strictTop                   // the root: each managed field decides
	strictAll                   // env: every key counts
	strictOne                   // checks: a check's name counts, not its inner fields
)

// extraCounts reports whether key, present only in the live config, is a
// change: a removed env key or named check, or a whole env, checks or
// services the toml no longer has; a guest, restart, stop or metrics
// config the toml does not set is the platform's default.
func extraCounts(s strictness, key string) bool {
	switch s {
	case strictAll, strictOne:
		return true
	case strictTop:
		return key == "env" || key == "checks" || key == "services"
	}
	return false
}

func childStrictness(s strictness, key string) strictness {
	switch s {
	case strictTop:
		switch key {
		case "env":
			return strictAll
		case "checks":
			return strictOne
		}
		return lenient
	case strictAll:
		return strictAll
	}
	return lenient
}

// walk compares live a with desired b.
func walk(path string, a, b any, strict strictness, out *[]Change) {
	am, aok := a.(map[string]any)
	bm, bok := b.(map[string]any)
	if aok && b == nil {
		aok, bok, strict = true, true, strictAll // removed: each of its leaves goes
	}
	if bok && a == nil {
		aok, bok = true, true // added: each of its leaves comes
	}
	if aok && bok {
		keys := make([]string, 0, len(am)+len(bm))
		for k := range bm {
			keys = append(keys, k)
		}
		for k := range am {
			if _, ok := bm[k]; !ok && extraCounts(strict, k) {
				keys = append(keys, k)
			}
		}
		slices.Sort(keys)
		keys = slices.Compact(keys)
		for _, k := range keys {
			walk(join(path, k), am[k], bm[k], childStrictness(strict, k), out)
		}
		return
	}
	al, aok := a.([]any)
	bl, bok := b.([]any)
	if aok && bok && len(al) == len(bl) {
		for i := range al {
			walk(fmt.Sprintf("%s[%d]", path, i), al[i], bl[i], strict, out)
		}
		return
	}
	if reflect.DeepEqual(a, b) || a == nil && empty(b) && isContainer(b) || b == nil && empty(a) {
		return
	}
	c := Change{Path: path, From: render(a), To: render(b)}
	if name, ok := strings.CutPrefix(path, "env."); ok && Sensitive(name) {
		// A credential that sits in a machine's env (set by hand, or by
		// an older toml) is named, never shown, nor its length.
		c.From, c.To = hidden(c.From), hidden(c.To)
	}
	*out = append(*out, c)
}

// isContainer reports an empty list or table: absent and empty are the same.
func isContainer(v any) bool {
	switch v.(type) {
	case []any, map[string]any:
		return true
	}
	return false
}

func join(path, k string) string {
	if path == "" {
		return k
	}
	return path + "." + k
}

// empty is a JSON zero: absent, null, false, 0, "", [] or {}.
func empty(v any) bool {
	switch x := v.(type) {
	case nil:
		return true
	case bool:
		return !x
	case float64:
		return x == 0
	case string:
		return x == ""
	case []any:
		return len(x) == 0
	case map[string]any:
		for _, e := range x {
			if !empty(e) {
				return false
			}
		}
		return true
	}
	return false
}

func render(v any) string {
	if v == nil {
		return ""
	}
	b, _ := json.Marshal(v)
	return string(b)
}

// managedTree is c's managed fields as a JSON tree, with metadata narrowed
// to the keys of keys.Metadata.
func managedTree(c, keys *fly.MachineConfig) map[string]any {
	if c == nil {
		c = &fly.MachineConfig{}
	}
	b, _ := json.Marshal(c)
	var all map[string]any
	_ = json.Unmarshal(b, &all)
	out := map[string]any{}
	for _, k := range Managed {
		if v, ok := all[k]; ok {
			out[k] = v
		}
	}
	if md, ok := out["metadata"].(map[string]any); ok {
		for k := range md {
			if _, want := keys.Metadata[k]; !want {
				delete(md, k)
			}
		}
	}
	return out
}

// sensitiveRE matches env names that hold credentials.
var sensitiveRE = regexp.MustCompile(`(?i)(^|_)(SECRET|TOKEN|PASSWORD|PASSWD|KEY|APIKEY|CREDENTIALS?)(_|$)`)

// Sensitive reports whether an env name looks like a credential (SECRET,
// ADMIN_KEY, FLY_API_TOKEN, DB_PASSWORD): such a value belongs in the
// app's secrets, and Diff never prints it.
func Sensitive(name string) bool { return sensitiveRE.MatchString(name) }

func hidden(v string) string {
	if v == "" {
		return ""
	}
	return "(hidden)"
}
