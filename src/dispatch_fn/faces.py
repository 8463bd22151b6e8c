"""A package's face that loads each of its names' modules on first use.

``concurrent.futures`` loads its executors so: the package names its whole
surface (``__all__``, and the imports the type checker reads), while importing
the package, or one of its modules, loads nothing else. The faces of ``db``,
``run`` and ``aws`` use it, so that parsing an event, connecting, migrating and
settling a page each load only what they need (tests/architecture).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from importlib import import_module


def lazy_face(
    package: str, homes: Mapping[str, str | None]
) -> tuple[Callable[[str], object], Callable[[], list[str]]]:
    """The ``__getattr__`` and ``__dir__`` of a face whose names live in ``homes``.

    ``homes`` maps each name to the module of ``package`` that defines it, or
    to None for a namespace: a module of the package, returned whole.
    """
    namespace = import_module(package).__dict__

    def __getattr__(name: str) -> object:  # noqa: N807 - the module hook PEP 562 names
        if name not in homes:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        home = homes[name]
        value = (
            import_module(f"{package}.{name}")
            if home is None
            else getattr(import_module(f"{package}.{home}"), name)
        )
        namespace[name] = value  # found once; later lookups skip the hook
        return value

    def __dir__() -> list[str]:  # noqa: N807 - the module hook PEP 562 names
        return sorted(homes)

    return __getattr__, __dir__
