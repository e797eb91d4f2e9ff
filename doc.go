// Package tare is the vocabulary of tare, a load tester that knows whose CPU
// it ran on: the types every other package speaks (Result, HostSample, Tick,
// Run, Summary, Signal, Verdict, Window) and the interfaces that connect them
// (Target). It imports only the standard library.
//
// Times in a Result are wall-clock instants carrying Go's monotonic reading,
// so differences between them are immune to clock steps. Shares are percent
// (0–100). A figure that could not be measured is nil, never 0.
package tare
