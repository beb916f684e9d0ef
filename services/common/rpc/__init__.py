"""Internal RPC between roles: gRPC transport, msgpack payloads of registered dataclasses.

Roles talk in the same dataclasses their cores use, so a core method is served by naming it:
no per-method protobuf glue. Only registered types decode (never pickle), numpy arrays travel
as raw buffers, and a :class:`~services.common.errors.MilvusError` raised in a core reaches the
caller as the same error.
"""
