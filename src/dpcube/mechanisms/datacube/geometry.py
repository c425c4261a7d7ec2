"""Cuboids of a schema as dense numpy arrays (one array per cuboid; roll-up is a sum over axes).

Dimension i of the cube is attribute i of the schema. A cuboid's array has the axes of its
attributes in schema order (a spatial attribute contributes its two axes); the cardinality of a
dimension is the number of cells of its attribute. Roll-up is a sum over axes; broadcasting
inserts size-1 axes. Internally every cuboid is kept in the *lattice layout* (one axis per
dimension, the attribute's cells flattened; :func:`dpcube.mechanisms.datacube.lattice.shape`) and
reshaped to :meth:`CubeGeometry.shape` only when handed to the user.

>>> from dpcube.schema import Schema
>>> s = Schema.from_dict({"attributes": [
...     {"name": "a", "kind": "nominal", "categories": ["x", "y"]},
...     {"name": "b", "kind": "ordinal", "range": [0, 2], "width": 1}]})
>>> g = CubeGeometry(s)
>>> g.lattice.cards, g.shape(0b11), g.shape(0b10)
((2, 3), (2, 3), (3,))
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from dpcube.errors import QueryError
from dpcube.mechanisms.datacube.lattice import Lattice, bits
from dpcube.schema import Schema


class CubeGeometry:
    """Maps cuboid bitmasks of a schema to array shapes and axes."""

    def __init__(self, schema: Schema) -> None:
        self.schema = schema
        self.names = schema.names
        self.attr_shapes: tuple[tuple[int, ...], ...] = tuple(a.shape for a in schema.attributes)
        self.lattice = Lattice(tuple(math.prod(s) for s in self.attr_shapes))

    def shape(self, mask: int) -> tuple[int, ...]:
        return tuple(n for i in bits(mask) for n in self.attr_shapes[i])

    def axes(self, big: int, dims: int) -> tuple[int, ...]:
        """Positions, in the axes of cuboid ``big``, of the axes of the dimensions ``dims ⊆ big``."""
        out: list[int] = []
        pos = 0
        for i in bits(big):
            width = len(self.attr_shapes[i])
            if dims >> i & 1:
                out.extend(range(pos, pos + width))
            pos += width
        return tuple(out)

    def schema_axes(self, mask: int) -> list[int]:
        """Positions, among the schema's axes, of the cuboid's axes."""
        return list(self.axes(self.lattice.base, mask))

    def mask(self, attributes: Sequence[str] | str) -> int:
        """The cuboid over the named attributes.

        >>> from dpcube.schema import Schema
        >>> s = Schema.from_dict({"attributes": [{"name": n, "kind": "nominal", "categories": ["0", "1"]}
        ...                                      for n in "abc"]})
        >>> CubeGeometry(s).mask(("c", "a"))
        5
        """
        if isinstance(attributes, str):
            attributes = [attributes]
        mask = 0
        for name in attributes:
            if name not in self.names:
                raise QueryError(
                    f"unknown attribute {name!r}; the schema has {', '.join(self.names)}"
                )
            mask |= 1 << self.names.index(name)
        return mask

    def attributes(self, mask: int) -> tuple[str, ...]:
        return tuple(self.names[i] for i in bits(mask))
