package main

import (
	"errors"
	"strings"
	"testing"
)

// TestBalancerAdminKeyRules: `purrctl balancer` on Fly refuses to start
// without ADMIN_KEY, with a key under 16 characters, or with the SECRET as
// its admin key: usage errors naming the variable, never the key.
func TestBalancerAdminKeyRules(t *testing.T) {
	t.Setenv("FLY_APP_NAME", "purrfly-test")
	t.Setenv("SECRET", "the-relay-secret-of-this-test")
	for _, tc := range []struct{ key, want string }{
		{"", "ADMIN_KEY is required on Fly"},
		{"short-admin-key", "shorter than 16"},
		{"the-relay-secret-of-this-test", "equals the relay SECRET"},
		{"a-good-key-0123456789abcdef,short", "admin key 2 is shorter"},
	} {
		if tc.key == "" {
			unsetenv(t, "ADMIN_KEY")
		} else {
			t.Setenv("ADMIN_KEY", tc.key)
		}
		err := runAction(t, balancerCommand(), runBalancer, "--port", "0")
		var ue usageError
		if !errors.As(err, &ue) || !strings.Contains(err.Error(), tc.want) {
			t.Fatalf("ADMIN_KEY=%q: %v, want a usage error saying %q", tc.key, err, tc.want)
		}
		if tc.key != "" && strings.Contains(err.Error(), tc.key) {
			t.Fatalf("the error names the key: %v", err)
		}
	}
}
