-- The whose-CPU ledger of each tick (JSON tare.CPUBy), and the run delay
-- of the system under test and of tare apart.
ALTER TABLE ticks ADD COLUMN sut_run_delay REAL;
ALTER TABLE ticks ADD COLUMN tare_run_delay REAL;
ALTER TABLE ticks ADD COLUMN cpu_by TEXT;
