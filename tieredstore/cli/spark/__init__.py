"""The commands that drive Spark: ``tieredstore spark`` (:mod:`.jobs`: export,
verify, compact, stats, pack) and ``tieredstore table`` (:mod:`.table`: the
Delta Lake tables that export writes)."""
