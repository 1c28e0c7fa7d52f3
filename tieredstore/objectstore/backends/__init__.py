"""The backends of the ObjectStore port: :mod:`.local` (a directory),
:mod:`.memory` (in memory, for tests and the benchmarks), both over
:mod:`.blocking_backed` (blocking calls run in threads); :mod:`.s3` (aioboto3),
with its settings and client in :mod:`.s3_settings` and S3's errors mapped
in :mod:`.s3_errors`. The port itself reaches them only through
:mod:`tieredstore.objectstore.factory`."""
