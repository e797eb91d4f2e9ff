// Package coord lets the generators of one sharded run agree on when to
// start and on what time it is, through a Redis server they all reach:
// no cluster protocol of tare's own.
//
// The barrier: each of N shards adds its index to a set keyed by the run
// (SADD), and the shard whose join makes the set whole writes the start
// instant, Redis's own TIME plus a lead, with SET NX, so exactly one value
// wins. Everyone polls for that key and starts at the instant it names.
//
//	shard 1 ─SADD─┐                          ┌─ GET start → T ─ wait ─▶ go at T
//	shard 2 ─SADD─┼─ SCARD = N ─ SET NX T ───┼─ GET start → T ─ wait ─▶ go at T
//	shard N ─SADD─┘   (the last to join)     └─ GET start → T ─ wait ─▶ go at T
//
// The clock: Offset reads Redis TIME between two local readings and takes
// the local midpoint as the instant Redis answered (Cristian's algorithm),
// so offset = redis − local midpoint, with an error of at most half the
// round trip. The start instant is in Redis's clock; each shard converts
// it to its own by subtracting its offset, so shards whose clocks disagree
// still start together, and records stored in local clocks can be put on
// one time axis again with the offsets recorded at start and end.
package coord
