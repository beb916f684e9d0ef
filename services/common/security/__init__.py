"""Authentication, RBAC and the audit log: plain Python over the MetaKV, no transport.

The proxy's gRPC interceptor (services/proxy/grpc_auth.py) and any other front-end call
:class:`services.common.security.guard.Guard`: ``authenticate(header) -> user`` and
``check(user, requirement)``.
"""
