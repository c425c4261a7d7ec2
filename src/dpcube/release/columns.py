"""Numeric columns of Arrow tables as numpy arrays, without pandas.

Below :mod:`dpcube.release.base` (which re-exports :func:`column_numpy`), so that the stored
bootstrap replicates (:mod:`dpcube.release.replicates`) read their tables without importing the
release class.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa
from numpy.typing import NDArray

#: Arrow primitive type names whose numpy dtype has another name.
_NUMPY_DTYPE = {"double": "float64", "float": "float32", "halffloat": "float16"}


def column_numpy(table: pa.Table, column: str | int) -> NDArray[Any]:
    """A numeric column of an Arrow table as a numpy array.

    Read from the column's data buffer where it is a primitive type without nulls: pyarrow's own
    ``to_numpy`` imports pandas (half a second of ``dpcube query``'s start-up).

    >>> column_numpy(pa.table({"a": pa.array([1, 2, 3])}).slice(1), "a").tolist()
    [2, 3]
    """
    array = table.column(column).combine_chunks()
    name = str(array.type)
    dtype = _NUMPY_DTYPE.get(name, name)
    if (
        array.null_count == 0
        and (pa.types.is_integer(array.type) or pa.types.is_floating(array.type))
        and len(array.buffers()) == 2
    ):
        np_dtype = np.dtype(dtype)
        data = array.buffers()[1]
        if data is None:
            return np.zeros(0, dtype=np_dtype)
        return np.frombuffer(
            data, dtype=np_dtype, count=len(array), offset=array.offset * np_dtype.itemsize
        ).copy()
    return np.asarray(array.to_numpy(zero_copy_only=False))


__all__ = ["column_numpy"]
