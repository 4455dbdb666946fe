// Package fleetview renders the balancer's admin API (/v1) for a person at
// a terminal: the tables and event lines of `purrctl fleet`. It only
// formats what client.Admin returns; `--json` bypasses it.
package fleetview
