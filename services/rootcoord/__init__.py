"""Root coordinator: the TSO, ids, the catalog of collections, DDL in timestamp order, and the
TimeTick broadcast that makes every channel's progress visible to consumers."""
