"""LSM compaction: levels and sorted runs, Paimon's universal picker, and the executors."""
