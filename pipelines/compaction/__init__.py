"""The dedicated compaction of write-only tables: their LSM shape, the compaction tasks and jobs,
the sensor launching them on the level-0 threshold, and the LSM checks on the table's asset."""
