// Package records owns the file formats of raw records, one tare.Result a
// record: JSONL, which tare runs export writes and tare runs import, tare
// compare and tare report read back (Read), CSV for a spreadsheet, and an
// HdrHistogram interval log of latency per tick for HistogramLogAnalyzer.
// Writers stream (Exporter), so a run of any size is written in flat
// memory.
package records
