package chaos

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
)

// maxLogBytes bounds what is scanned of one log file.
const maxLogBytes = 256 << 20

// scanSecrets reads every machine log in dir and reports each line that
// holds the shared secret, the Machines API token, or looks like a
// credential (secret=, "secret":", Bearer ): none may be logged.
func scanSecrets(dir string, values []string, led *ledger) (files, lines int, err error) {
	paths, err := filepath.Glob(filepath.Join(dir, "*.log"))
	if err != nil {
		return 0, 0, err
	}
	needles := []string{"secret=", `"secret":"`, "Bearer "}
	for _, v := range values {
		if len(v) >= 6 {
			needles = append(needles, v)
		}
	}
	for _, p := range paths {
		f, err := os.Open(p)
		if err != nil {
			return files, lines, err
		}
		files++
		sc := bufio.NewScanner(io.LimitReader(f, maxLogBytes))
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for n := 1; sc.Scan(); n++ {
			lines++
			line := sc.Text()
			for _, nd := range needles {
				if strings.Contains(line, nd) {
					led.violate(InvSecretInLog, "", "%s line %d holds %s", filepath.Base(p), n, describe(nd, values))
					break
				}
			}
		}
		_ = f.Close()
	}
	return files, lines, nil
}

// describe names a needle without repeating a secret value.
func describe(needle string, values []string) string {
	for _, v := range values {
		if needle == v {
			return "a configured secret value"
		}
	}
	return fmt.Sprintf("%q", needle)
}
