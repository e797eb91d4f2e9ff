// Package session runs one measurement from start to end through the other
// packages, in the order of the data flow of docs/architecture.md:
//
//	arrival.Process ──> load.Runner ──> tare.Result ──┐
//	                                                  ├──> stats.Recorder ──> judge ──> tare.Summary
//	host.Sampler ─────> tare.HostSample (every tick) ─┤        (one consumer: no locks)
//	queue depth ──────> (twice a tick) ───────────────┘
//	                          results and ticks stream to the store as they come
//
// A Config says what one window takes: the target and its schedule, the
// engine's limits, the host sampler and the system under test, what the
// verdict is measured against, the store, and hooks for the live progress
// line and for what the caller adds to the summary. DefaultConfig gives
// the defaults the command line starts from.
//
// Measure runs a window with load: the host is sampled during the very same
// seconds, every result and host sample goes to one recorder, and the
// summary is judged when the arrivals end. Observe is the same window with
// no load of tare's own (tare watch, tare check). Sweep is the capacity
// search: a Measure per step, each step judged for saturation, the rate
// raised, then narrowed, until the highest rate that meets the SLO is found.
//
// Load reads a stored run back, its shards merged and its sweep steps
// judged again; Compare and LoadWindows are what tare compare and the
// protocol judge across runs (Compare also sets each window chosen from a
// host's calendar against what it measured); Records re-summarises raw
// records files. A Keeper keeps a host's calendar (tare check --every):
// an Observe-based sample every so often, stored; Plan.ChooseWindows
// takes a plan's windows: auto from it.
//
// A cancelled context stops the arrivals and yields a summary marked
// interrupted: nothing measured is lost. A store that fails mid-run does
// not stop the measurement: its error is returned beside the summary.
//
// Printing is the caller's: session returns figures and calls hooks, and
// writes nothing itself.
package session
