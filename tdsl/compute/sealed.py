"""Sealed: the base of the algorithm's graph objects (tensors, views, updates,
pipelines), which cannot change once they are made."""

from __future__ import annotations


class Sealed:
    """A graph object: its constructor sets its attributes and ends with `_seal()`;
    afterwards setting or deleting an attribute raises."""

    __slots__ = ()

    def _seal(self) -> None:
        object.__setattr__(self, "_sealed", True)

    def __setattr__(self, name: str, value) -> None:
        if "_sealed" in self.__dict__:
            what = type(self).__name__ + (f" {self.__dict__['name']!r}" if "name" in self.__dict__ else "")
            raise AttributeError(
                f"{what} cannot change after it is made (setting {name}); make a new one instead")
        object.__setattr__(self, name, value)

    def __delattr__(self, name: str) -> None:
        raise AttributeError(f"{type(self).__name__}: attribute {name} cannot be deleted")
