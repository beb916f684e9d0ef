"""Load states of a collection or partitions, as the querycoord reports them (common.proto
LoadState values); the proxy compares with them, so they live below both roles."""

#: common.proto LoadState values
LOAD_STATE_NOT_EXIST = 0
LOAD_STATE_NOT_LOAD = 1
LOAD_STATE_LOADING = 2
LOAD_STATE_LOADED = 3
