-- Behind whom the measured processes waited for a CPU in each tick (JSON
-- tare.Blame), as the scheduler probe measured it; NULL without the probe,
-- when the tick's blame is estimated from the ledger on reading.
ALTER TABLE ticks ADD COLUMN blame TEXT;
