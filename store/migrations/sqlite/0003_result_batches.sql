-- Results are stored in batches: one row holds up to 4,096 records of a
-- run in seq order, encoded into one blob (store/batch.go). A row per
-- record cost about 4.5 µs of CPU each in tare's own process. The counts
-- serve the summary of a run that never finished. Batches of one run
-- overlap in seq where requests were slow; readers merge them.
--
-- The results table keeps the records of runs stored before this version
-- and is read beside the batches; nothing writes it any more.
CREATE TABLE result_batches (
	run       INTEGER NOT NULL,
	first_seq INTEGER NOT NULL,
	last_seq  INTEGER NOT NULL,
	records   INTEGER NOT NULL,
	dropped   INTEGER NOT NULL,
	errors    INTEGER NOT NULL,
	data      BLOB    NOT NULL,
	UNIQUE (run, first_seq)
);

-- The batches a new one may share a seq with: those whose last seq is at
-- or after its first, which is the last few.
CREATE INDEX result_batches_by_last ON result_batches (run, last_seq);
