-- What tells the code's own slow ticks from the host's in each tick: the
-- share of it some task waited for I/O (/proc/pressure/io), the processes
-- that read and wrote the most to storage (JSON []tare.ProcessIO), and how
-- long tare's fixed piece of CPU work took, in µs. NULL where not
-- measured, and in ticks stored before.
ALTER TABLE ticks ADD COLUMN psi_io_some REAL;
ALTER TABLE ticks ADD COLUMN io_by TEXT;
ALTER TABLE ticks ADD COLUMN fixed_work_us REAL;
