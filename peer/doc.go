// Package peer reads the per-request results of other load tools, so that
// `tare watch --results FORMAT:PATH` can put a tool's latencies on tare's
// timeline beside the host samples of the same seconds.
//
// Formats (Lookup names them as --results does):
//
//	vegeta       vegeta attack's binary output (a gob stream), as written by
//	             `vegeta attack -output results.bin`
//	vegeta-json  `vegeta encode` JSON: one result object per line
//	hey-csv      hey's `-o csv`: a header line, then response-time (s),
//	             DNS+dialup, DNS, Request-write, Response-delay,
//	             Response-read, status-code, offset (s since hey started)
//	jsonl        for any other tool: one JSON object per line,
//
//	    {"timestamp": "2026-01-02T15:04:05.123Z", "latency_ms": 12.5, "status": 200}
//	    {"timestamp": 1767366245.623, "latency_ms": 3000, "status": 0, "error": "timeout"}
//
//	             timestamp: when the request started, an RFC 3339 string or
//	             seconds since the Unix epoch (a number); latency_ms: its
//	             latency in milliseconds; status: the HTTP status, 0 when
//	             there was none (a non-HTTP tool); error: optional, the
//	             failure ("" or absent when it succeeded). A non-2xx status
//	             is a failure too ("http 503"). Other keys are ignored.
//
// Every reader streams: it holds one record at a time, plus a coarse map of
// sends and completions (10 ms buckets) to find stalls. Errors wrap ErrParse
// and name the record or line, what was wrong, and quote the input.
//
// # What the timestamps are
//
// tare measures latency from the scheduled time (docs/json.md): no other tool
// tells tare its schedule, so the results read here start at whatever the
// tool stamped, and each Format says what that is (its Timing):
//
//   - vegeta stamps the actual send of an open loop. While its workers keep
//     up, the send is the schedule; when they run out (a stalled server,
//     -max-workers reached), sends fall behind and the latencies, measured
//     from the late send, hide the queueing (coordinated omission). The
//     reader finds such stalls: gaps in the sends while requests were in
//     flight.
//   - hey is a closed loop: each of its -c workers sends the next request
//     only when the last one answered, so a slow server gets fewer requests,
//     not longer latencies: coordinated omission by construction. hey's CSV
//     also leaves out the requests that failed without a response (their
//     count is only in hey's own summary), and its offsets count from hey's
//     own start, which the caller supplies (Options.Start).
//   - jsonl timestamps are what the tool wrote: tare cannot tell whether
//     they are scheduled times.
//
// Reader.Warnings says so, in words for the summary.
package peer
