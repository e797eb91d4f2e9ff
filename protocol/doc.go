// Package protocol is the three-window protocol: the same load in a peak,
// an off-peak and a mid window, so that capacity comes out as a range and a
// host that changes the curve by the hour is caught.
//
// It owns the windows (defaults peak 14:00–16:00, off-peak 02:00–04:00, mid
// 08:00–10:00, in the local time zone or the plan's), the YAML plan file,
// the schedule that lays out each window's slot and its seeded start, the
// scheduler that waits for them, and the crontab lines that run them
// instead.
//
// # What it assumes
//
//   - The store is the protocol's memory. A window is done when a complete
//     run of the protocol, labelled with the window, started inside that
//     window's slot. Nothing else is kept, so a restarted tare (or another
//     host sharing a PostgreSQL store) picks up where the last one stopped:
//     a slot already done is not rerun, and a slot whose time passed with
//     no complete run is reported missed, never faked.
//   - The protocol begins with its first stored run. Before any run is
//     stored it begins now: a slot counts from the first one in which the
//     load can still fit.
//   - Each window's run starts at an offset inside the window drawn from
//     the plan's seed, the protocol id, the window and the day, so the
//     schedule is the same after a restart and the load does not always
//     hit the window's first minute. The offset leaves room for the whole
//     load before the window closes.
//   - Windows are wall-clock times in the plan's time zone: across a
//     daylight-saving change a two-hour window stays 14:00–16:00 on the
//     clock. A window whose end is not after its start runs past midnight.
//
// Everything here is pure but the Scheduler's loop, whose clock and wait
// are injected, so tests run a whole protocol, restarts and missed windows
// included, without waiting.
package protocol
