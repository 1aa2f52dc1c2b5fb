"""The seed-replica key as :mod:`s2s.verify` imports it; its home is :mod:`s2s.claims.seeds`."""

from s2s.claims.seeds import replica_key  # noqa: F401
