"""The failure search (conventions §6): the probes every search runs and the registry of the probes a task's record
names (`probes`), composition's indistinguishable pairs (`pairs`), 2-Sum's summary collisions (`collisions`), the
architecture searches (`hybrid`, `sparse`), and the report whose every finding a fresh run confirmed (`report`)."""
