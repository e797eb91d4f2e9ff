// Package calendar is a host's interference calendar: when the host is
// quiet and when it is busy, measured rather than guessed. Its input is
// the short samples `tare check --every` stores (tare.CalendarSample); its
// output is the calendar by the hour of the day (tare.Calendar), the
// protocol windows chosen from it (tare.WindowChoice), and whether a window
// measured as the calendar predicted (tare.WindowCheck).
//
// Everything here is pure: the samples come in, the clock is a field of
// Config, and the bootstrap is seeded, so the same samples give the same
// calendar byte for byte.
//
// # What it assumes
//
//   - Interference is the CPU a test would not have had: steal plus the
//     neighbours' CPU (other processes and unattributed busy time), in
//     percent of all the host's CPU time (tare.HostSummary.Interference).
//     tare's own sampling is not in it, nor are kernel threads.
//   - The day is the unit of evidence, not the sample. Samples of one hour
//     of one day are not independent (a backup that runs at 03:00 runs
//     the whole hour), so each hour of each day is first averaged, and the
//     hours are ranked by the mean of those daily means; a day with many
//     samples weighs no more than a day with few.
//   - How sure a ranking is comes from a bootstrap over the days: the days
//     are drawn again with replacement (DefaultResamples times, seeded) and
//     the hours ranked again each time. The quietest hour's "sure" is the
//     share of resamples in which it came out quietest; its interval, the
//     2.5th and 97.5th percentiles of its mean over the resamples.
//   - Whether the hours differ at all is a permutation test, not the
//     extremes' intervals: the quietest and the busiest of 24 hours are
//     always apart by some chance amount (the winner's curse), so each
//     day's hours are shuffled among themselves, which is what "the hour
//     makes no difference" allows, and the spread between the lowest and
//     the highest hour mean is set against the observed one.
//   - MinDays (5) days are needed before hours are ranked at all. From n
//     days a bootstrap can draw C(2n−1, n) different samples: 35 from 4
//     days, 126 from 5. A 95 % interval cuts 2.5 % from each tail, which
//     needs at least 40 distinct resamples to cut anything; below that the
//     interval would be the data's own range, claiming a certainty the days
//     cannot give. With fewer days the calendar says "too few days to
//     tell" instead of naming an hour.
//   - Weekdays are told apart only once every weekday has been seen on two
//     dates: one Monday cannot tell a Monday habit from a one-off.
package calendar
