// Package flyconfig turns an app's fly.toml into the machine config a deploy
// sends to the Machines API, and compares two machine configs, so that the
// toml in the repository, not whatever a machine happens to run, is what a
// rollout deploys (fly deploy's semantics, without flyctl).
//
// # What it reads
//
// The subset of fly.toml purrfly's apps use, each key as flyctl reads it:
// app, primary_region, kill_signal, kill_timeout (seconds, or a duration
// string), [build] (ignored: the image is built elsewhere and named by the
// deploy), [processes] (exactly one group, "app", whose command line becomes
// init.cmd), [env], [metrics], [http_service] (a tcp service with port 80
// [http] and 443 [tls, http], its concurrency, autostop/autostart, minimum
// running and [[http_service.checks]]), [[services]] (protocol,
// internal_port, [[services.ports]], concurrency, [[services.http_checks]]
// and [[services.tcp_checks]]), [checks.NAME], [[vm]] (size, memory,
// cpus, cpu_kind) and [[restart]] (policy, retries). Any other key is an
// error naming it: a setting the tool would silently drop is worse than one
// it refuses.
//
// # What it writes
//
// File.MachineConfig builds a *fly.MachineConfig: the fields above, the
// image, env plus PRIMARY_REGION and FLY_PROCESS_GROUP, and metadata
// fly_process_group, as flyctl does. Managed lists those fields; Merge puts
// them over a machine's live config, keeping what fly.toml does not manage
// (mounts, files, a schedule, DNS, standbys); Diff lists, per managed field,
// what an update would change ("env.LOG_LEVEL: "info" -> "debug""), after
// canonicalising both sides through JSON so that an absent field and its zero
// value compare equal.
package flyconfig
