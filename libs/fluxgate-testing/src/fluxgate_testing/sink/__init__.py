"""Test support for persisters: in-memory fakes for unit tests, and the shared suite every
persister runs against its real store (never imported at run time)."""
