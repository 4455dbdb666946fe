package devstack_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/purrfly/purrfly/client"
	"github.com/purrfly/purrfly/devstack"
)

// TestStackAdminKey: a stack without Options.AdminKey gets a generated
// 64-hex key that the /v1 API takes (what `purrctl dev` prints), and one
// with a key uses it and refuses others.
func TestStackAdminKey(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	st, err := devstack.Start(ctx, devstack.Options{BalancerPort: 0, Regions: []string{"eu"}})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if k := st.AdminKey(); len(k) != 64 || strings.Trim(k, "0123456789abcdef") != "" {
		t.Fatalf("generated admin key %q", k)
	}
	if st.AdminURL() != st.Balancer.URL()+"/v1" {
		t.Fatalf("admin URL %s", st.AdminURL())
	}
	stats, err := st.Admin().Stats(ctx)
	if err != nil || stats.Relays != 1 {
		t.Fatalf("stats with the stack's key: %+v %v", stats, err)
	}

	const key = "devstack-admin-key-0123456789abcdef"
	st2, err := devstack.Start(ctx, devstack.Options{Regions: []string{"us"}, AdminKey: key})
	if err != nil {
		t.Fatal(err)
	}
	defer st2.Close()
	if st2.AdminKey() != key {
		t.Fatalf("admin key %q, want the configured one", st2.AdminKey())
	}
	if _, err := client.NewAdmin(st2.Balancer.URL(), st.AdminKey()).Stats(ctx); err == nil {
		t.Fatal("another stack's key was accepted")
	}
}
