package flyconfig

import (
	"encoding/json"
	"fmt"
	"reflect"
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

// Diff lists the managed fields in which desired differs from live, sorted
// by path. Metadata is compared on the keys desired sets only.
func Diff(live, desired *fly.MachineConfig) []Change {
	a, b := managedTree(live, desired), managedTree(desired, desired)
	var out []Change
	walk("", a, b, &out)
	slices.SortFunc(out, func(x, y Change) int { return strings.Compare(x.Path, y.Path) })
	return out
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

func walk(path string, a, b any, out *[]Change) {
	am, aok := a.(map[string]any)
	bm, bok := b.(map[string]any)
	if aok && b == nil || bok && a == nil {
		aok, bok = true, true // a table on one side only: list its keys
	}
	if aok && bok {
		keys := map[string]bool{}
		for k := range am {
			keys[k] = true
		}
		for k := range bm {
			keys[k] = true
		}
		for k := range keys {
			walk(join(path, k), am[k], bm[k], out)
		}
		return
	}
	al, aok := a.([]any)
	bl, bok := b.([]any)
	if aok && bok && len(al) == len(bl) {
		for i := range al {
			walk(fmt.Sprintf("%s[%d]", path, i), al[i], bl[i], out)
		}
		return
	}
	if empty(a) && empty(b) || reflect.DeepEqual(a, b) {
		return
	}
	*out = append(*out, Change{Path: path, From: render(a), To: render(b)})
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
	if empty(v) {
		return ""
	}
	b, _ := json.Marshal(v)
	return string(b)
}
