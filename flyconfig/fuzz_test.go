package flyconfig

import "testing"

// FuzzParse: any bytes either fail to parse with an error or give a File
// whose machine config builds and diffs against itself as empty.
func FuzzParse(f *testing.F) {
	// Small seeds: the coverage-guided engine minimises every new
	// interesting input, which for a whole fly.toml takes longer than a CI
	// fuzz run lasts.
	f.Add([]byte("app = 'a'\nkill_timeout = 5\n[processes]\napp = 'relay'\n[env]\nA = '1'\n"))
	f.Add([]byte("[http_service]\ninternal_port = 80\nauto_stop_machines = 'off'\n[[http_service.checks]]\npath = '/ping'\ninterval = '1s'\n"))
	f.Add([]byte("[checks.ready]\ntype = 'http'\nport = 1\n[metrics]\nport = 2\n"))
	f.Add([]byte("[[vm]]\nmemory = 512\n[[services]]\nprotocol = 'udp'\ninternal_port = 7\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		file, err := Parse(b)
		if err != nil {
			return
		}
		c, err := file.MachineConfig("img")
		if err != nil {
			t.Fatalf("parsed but does not build: %v", err)
		}
		if d := Diff(c, c); len(d) != 0 {
			t.Fatalf("config differs from itself: %v", d)
		}
		if d := Diff(Merge(nil, c), c); len(d) != 0 {
			t.Fatalf("merged config differs: %v", d)
		}
	})
}
