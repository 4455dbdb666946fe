package lockrank

import "flag"

// EnableForTests turns the checker on in a test binary, from its TestMain,
// unless it runs benchmarks (-test.bench), which measure the locks as
// production takes them. It parses the command line's flags.
func EnableForTests() {
	if !flag.Parsed() {
		flag.Parse()
	}
	if f := flag.Lookup("test.bench"); f != nil && f.Value.String() != "" {
		return
	}
	Enable()
}
