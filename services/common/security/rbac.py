"""Managing users, roles and grants (the RPCs behind ``create_user``, ``grant_privilege``,
``describe_role``, ...), with Milvus's rules and refusals, over the :class:`RbacStore`.

Every change reaches the store as one transaction and then clears the local :class:`Guard`
cache; other proxies learn of it through their watch on the store's version.
"""

from __future__ import annotations

from collections.abc import Callable, Collection
from dataclasses import dataclass, field, replace

from vectide.services.common import errors
from vectide.services.common.errors import Code, MilvusError
from vectide.services.common.security.guard import ADMIN, BUILTIN_ROLES, PUBLIC, ROOT
from vectide.services.common.security.passwords import (
    DEFAULT_ROUNDS,
    check_password,
    check_role_name,
    check_username,
    hash_password,
    verify_password,
)
from vectide.services.common.security.privileges import (
    ANY,
    GROUP_PREFIX,
    GROUPS,
    OBJECT_TYPES,
    PREFIX,
    PUBLIC_DEFAULTS,
    Grant,
    api_name,
    store_name,
)
from vectide.services.common.security.store import Changes, RbacStore, Snapshot, User


@dataclass(frozen=True)
class RbacBackup:
    """What BackupRBAC hands out and RestoreRBAC takes back (Milvus's RBACMeta): the users but
    ``root`` with their password hashes and roles, the roles but the built-in ones with their
    descriptions and grants, and the custom privilege groups. Privileges are named as clients
    name them (``Insert``, ``ClusterReadOnly``, a custom group's name)."""

    users: tuple[User, ...] = ()
    roles: dict[str, str] = field(default_factory=dict)
    grants: tuple[Grant, ...] = ()
    groups: dict[str, tuple[str, ...]] = field(default_factory=dict)


class Rbac:
    def __init__(
        self,
        store: RbacStore,
        known_privileges: frozenset[str],
        on_change: Callable[[], None] = lambda: None,
        rounds: int = DEFAULT_ROUNDS,
    ) -> None:
        self._store = store
        self._known = known_privileges
        self._on_change = on_change
        self._rounds = rounds

    def _change(self, plan: Callable[[Snapshot], Changes]) -> None:
        self._store.change(plan)
        self._on_change()

    def bootstrap(self, root_password: str) -> None:
        """Create what a new cluster starts with, once (any proxy may race to it): ``root``
        with ``root_password``, the ``admin`` and ``public`` roles, ``public``'s grants."""
        hashed = hash_password(root_password, self._rounds)

        def plan(snap: Snapshot) -> Changes:
            changes = Changes()
            if ROOT not in snap.users:
                changes.put_user(User(ROOT, hashed))
            if ADMIN not in snap.roles:
                changes.put_role(ADMIN, "built in: every privilege")
            if PUBLIC not in snap.roles:
                changes.put_role(PUBLIC, "built in: held by every user")
                grants = [Grant(PUBLIC, t, ANY, ANY, p, ROOT) for t, p in PUBLIC_DEFAULTS]
                changes.put_grants(PUBLIC, grants)
            return changes

        self._change(plan)

    # -- users ---------------------------------------------------------------------------

    def create_user(self, name: str, password: str) -> None:
        check_username(name)
        check_password(password)
        hashed = hash_password(password, self._rounds)

        def plan(snap: Snapshot) -> Changes:
            if name in snap.users:
                raise errors.invalid(f"user already exists: {name}")
            changes = Changes()
            changes.put_user(User(name, hashed))
            return changes

        self._change(plan)

    def update_password(self, name: str, old: str, new: str) -> None:
        """As Milvus: the old password must be given and right, whoever asks."""
        check_password(new)
        user = self._user(self._store.load(), name)
        if not verify_password(old, user.password_hash):
            raise MilvusError(
                Code.PRIVILEGE_NOT_AUTHENTICATED, f"old password not correct for {name}"
            )
        hashed = hash_password(new, self._rounds)

        def plan(snap: Snapshot) -> Changes:
            current = self._user(snap, name)
            changes = Changes()
            changes.put_user(User(name, hashed, current.roles))
            return changes

        self._change(plan)

    def delete_user(self, name: str) -> None:
        if name == ROOT:
            raise errors.invalid("root user cannot be deleted")

        def plan(snap: Snapshot) -> Changes:
            self._user(snap, name)
            changes = Changes()
            changes.delete_user(name)
            for key in snap.apikeys.values():  # a dropped user's keys go with it
                if key.user == name:
                    changes.delete_apikey(key.digest)
            return changes

        self._change(plan)

    def list_users(self) -> list[str]:
        return sorted(self._store.load().users)

    @staticmethod
    def _user(snap: Snapshot, name: str) -> User:
        user = snap.users.get(name)
        if user is None:
            raise errors.invalid(f"user not found: {name}")
        return user

    # -- roles ---------------------------------------------------------------------------

    def create_role(self, name: str, description: str = "") -> None:
        check_role_name(name)

        def plan(snap: Snapshot) -> Changes:
            if name in snap.roles:
                raise errors.invalid(f"role [name:{name!r}] already exists")
            changes = Changes()
            changes.put_role(name, description)
            return changes

        self._change(plan)

    def alter_role(self, name: str, description: str) -> None:
        """A role's description (AlterRole); grants and members stay."""

        def plan(snap: Snapshot) -> Changes:
            self._role(snap, name)
            changes = Changes()
            changes.put_role(name, description)
            return changes

        self._change(plan)

    def role_descriptions(self) -> dict[str, str]:
        return dict(self._store.load().roles)

    def drop_role(self, name: str, force: bool = False) -> None:
        """Refused for the built-in roles, and, unless ``force``, while the role holds grants
        (Milvus's rule: revoke first); members simply lose the role."""
        if name in BUILTIN_ROLES:
            raise errors.invalid(f"the role[{name}] is a default role, which can't be dropped")

        def plan(snap: Snapshot) -> Changes:
            self._role(snap, name)
            if snap.grants.get(name) and not force:
                raise errors.invalid(
                    f"fail to drop the role[{name}] that it has privileges: revoke them first "
                    "or drop it with force_drop"
                )
            changes = Changes()
            changes.delete_role(name)
            for user in snap.users.values():
                if name in user.roles:
                    roles = tuple(r for r in user.roles if r != name)
                    changes.put_user(User(user.name, user.password_hash, roles))
            return changes

        self._change(plan)

    def set_user_role(self, user_name: str, role: str, member: bool) -> None:
        """Add ``user_name`` to ``role`` (``member``) or remove it; repeating either is fine."""

        def plan(snap: Snapshot) -> Changes:
            user = self._user(snap, user_name)
            self._role(snap, role)
            if role == PUBLIC:
                raise errors.invalid("every user holds the public role: it cannot be changed")
            roles = [r for r in user.roles if r != role] + ([role] if member else [])
            changes = Changes()
            if tuple(roles) != user.roles:
                changes.put_user(User(user.name, user.password_hash, tuple(roles)))
            return changes

        self._change(plan)

    def select_roles(self, name: str = "") -> list[tuple[str, list[str]]]:
        """Each role (or just ``name``; none if it does not exist) with its users."""
        snap = self._store.load()
        names = [name] if name else sorted(snap.roles)
        return [
            (r, sorted(u.name for u in snap.users.values() if r in u.roles))
            for r in names
            if r in snap.roles
        ]

    def select_users(self, name: str = "") -> list[tuple[str, list[str]]]:
        """Each user (or just ``name``; none if it does not exist) with its roles."""
        snap = self._store.load()
        names = [name] if name else sorted(snap.users)
        return [(n, list(snap.users[n].roles)) for n in names if n in snap.users]

    @staticmethod
    def _role(snap: Snapshot, name: str) -> None:
        if name not in snap.roles:
            raise errors.invalid(f"not found the role, maybe the role isn't existed: {name}")

    # -- grants --------------------------------------------------------------------------

    def grant(self, grant: Grant, revoke: bool = False) -> None:
        """Add ``grant`` (its privilege as clients name it) or remove it; idempotent."""
        if grant.object_type not in OBJECT_TYPES:
            raise errors.invalid(
                f"invalid object type {grant.object_type!r}: one of {', '.join(OBJECT_TYPES)}"
            )
        if not grant.object_name or not grant.db_name:
            raise errors.invalid("the object name and database of a grant must not be empty")
        groups = self._store.load().groups
        stored = Grant(
            grant.role,
            grant.object_type,
            grant.object_name,
            grant.db_name,
            store_name(grant.privilege, self._known, groups),
            grant.grantor,
        )

        def plan(snap: Snapshot) -> Changes:
            self._role(snap, stored.role)
            if is_custom(stored.privilege) and api_name(stored.privilege) not in snap.groups:
                raise errors.invalid(f"privilege group {grant.privilege} was dropped meanwhile")
            held = snap.grants.get(stored.role, [])
            kept = [g for g in held if g.key() != stored.key()]
            changes = Changes()
            if revoke and len(kept) != len(held):
                changes.put_grants(stored.role, kept)
            elif not revoke and len(kept) == len(held):
                changes.put_grants(stored.role, [*held, stored])
            return changes

        self._change(plan)

    def select_grants(
        self, role: str, object_type: str = "", object_name: str = "", db_name: str = ""
    ) -> list[Grant]:
        """The role's grants, narrowed by whatever filter is given (a database also shows
        grants on every database, ``*``)."""
        snap = self._store.load()
        self._role(snap, role)
        return [
            g
            for g in snap.grants.get(role, [])
            if object_type in ("", g.object_type)
            and object_name in ("", g.object_name)
            and (db_name in ("", ANY) or g.db_name in (ANY, db_name))
        ]

    # -- privilege groups (Milvus 2.5) -----------------------------------------------------

    def create_privilege_group(self, name: str) -> None:
        check_role_name(name)  # Milvus checks group names as role names

        def plan(snap: Snapshot) -> Changes:
            if name in snap.groups:
                raise errors.invalid(f"privilege group [{name}] already exists")
            self._refuse_builtin_name(name)
            changes = Changes()
            changes.put_group(name, frozenset())
            return changes

        self._change(plan)

    def _refuse_builtin_name(self, group: str) -> None:
        if PREFIX + group in self._known or GROUP_PREFIX + group in self._known:
            raise errors.invalid(
                f"privilege group name [{group}] is a built-in privilege or privilege group"
            )

    def drop_privilege_group(self, name: str) -> None:
        """Idempotent, as Milvus's; refused while a role holds a grant of the group."""

        def plan(snap: Snapshot) -> Changes:
            changes = Changes()
            if name not in snap.groups:
                return changes
            for role, grants in sorted(snap.grants.items()):
                if any(g.privilege == GROUP_PREFIX + name for g in grants):
                    raise errors.invalid(
                        f"privilege group [{name}] is granted to role [{role}]: revoke it first"
                    )
            changes.delete_group(name)
            return changes

        self._change(plan)

    def privilege_groups(self) -> dict[str, list[str]]:
        """Custom groups and their privileges as clients name them."""
        groups = self._store.load().groups
        return {name: sorted(map(api_name, groups[name])) for name in sorted(groups)}

    def change_privilege_group(self, name: str, privileges: list[str], remove: bool) -> None:
        """Add privileges to a custom group, or remove them; single privileges only."""
        wanted = set()
        for privilege in privileges:
            stored = PREFIX + privilege
            if stored not in self._known or stored.startswith(GROUP_PREFIX):
                raise errors.invalid(f"not found the privilege name[{privilege}]")
            wanted.add(stored)

        def plan(snap: Snapshot) -> Changes:
            current = snap.groups.get(name)
            if current is None:
                raise errors.invalid(f"privilege group [{name}] does not exist")
            changes = Changes()
            changes.put_group(name, current - wanted if remove else current | wanted)
            return changes

        self._change(plan)

    # -- backup and restore (Milvus 2.5's BackupRBAC / RestoreRBAC) --------------------------

    def backup(self) -> RbacBackup:
        snap = self._store.load()
        roles = {name: d for name, d in sorted(snap.roles.items()) if name not in BUILTIN_ROLES}
        return RbacBackup(
            users=tuple(snap.users[name] for name in sorted(snap.users) if name != ROOT),
            roles=roles,
            grants=tuple(
                replace(g, privilege=api_name(g.privilege))
                for role in roles
                for g in snap.grants.get(role, [])
            ),
            groups={
                name: tuple(sorted(map(api_name, privileges)))
                for name, privileges in sorted(snap.groups.items())
            },
        )

    def restore(self, backup: RbacBackup) -> None:
        """Add everything in ``backup`` in one transaction, or nothing: as Milvus, a user, role
        or privilege group that exists already refuses the whole restore."""
        for user in backup.users:
            check_username(user.name)
            if not user.password_hash.startswith("$2"):
                raise errors.invalid(f"user [{user.name}]: the password is not a bcrypt hash")
        for name in [*backup.roles, *backup.groups]:
            check_role_name(name)
        for name in backup.groups:
            self._refuse_builtin_name(name)

        def plan(snap: Snapshot) -> Changes:
            for kind, names, existing in (
                ("role", backup.roles, snap.roles),
                ("privilege group", backup.groups, snap.groups),
                ("user", [u.name for u in backup.users], snap.users),
            ):
                for name in names:
                    if name in existing:
                        raise errors.invalid(f"{kind} [{name}] already exists")
            groups = {**snap.groups, **{n: frozenset() for n in backup.groups}}
            changes = Changes()
            for name, description in backup.roles.items():
                changes.put_role(name, description)
            for name, privileges in backup.groups.items():
                changes.put_group(name, frozenset(map(self._single_privilege, privileges)))
            roles = snap.roles.keys() | backup.roles.keys()
            for role, grants in _by_role(backup.grants).items():
                if role not in roles:
                    raise errors.invalid(f"role [{role}] does not exist")
                held = {g.key(): g for g in snap.grants.get(role, [])}
                for grant in grants:
                    stored = self._restored_grant(grant, groups)
                    held.setdefault(stored.key(), stored)
                changes.put_grants(role, list(held.values()))
            for user in backup.users:
                held = tuple(r for r in user.roles if r != PUBLIC)
                for role in held:
                    if role not in roles:
                        raise errors.invalid(f"role [{role}] does not exist")
                changes.put_user(User(user.name, user.password_hash, held))
            return changes

        self._change(plan)

    def _single_privilege(self, privilege: str) -> str:
        stored = PREFIX + privilege
        if stored not in self._known or stored.startswith(GROUP_PREFIX):
            raise errors.invalid(f"privilege [{privilege}] does not exist")
        return stored

    def _restored_grant(self, grant: Grant, groups: Collection[str]) -> Grant:
        if grant.object_type not in OBJECT_TYPES:
            raise errors.invalid(f"invalid object type {grant.object_type!r} of a grant")
        if not grant.object_name or not grant.db_name:
            raise errors.invalid("the object name and database of a grant must not be empty")
        try:
            privilege = store_name(grant.privilege, self._known, groups)
        except MilvusError:
            raise errors.invalid(f"privilege [{grant.privilege}] does not exist") from None
        return replace(grant, privilege=privilege)


def _by_role(grants: tuple[Grant, ...]) -> dict[str, list[Grant]]:
    out: dict[str, list[Grant]] = {}
    for grant in grants:
        out.setdefault(grant.role, []).append(grant)
    return out


def is_custom(privilege: str) -> bool:
    """A stored privilege naming a custom group (not a built-in one)."""
    return privilege.startswith(GROUP_PREFIX) and privilege not in GROUPS
