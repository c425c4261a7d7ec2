"""DP data cubes: cuboid selection (BMax, PMost) and consistency (Ding, Winslett, Han, Li,
"Differentially Private Data Cubes: Optimizing Noise Sources and Consistency", SIGMOD 2011).

See ``docs/datacube.md``; the modules follow the paper:
:mod:`.lattice` (Sec. 2), :mod:`.selection` (Secs. 4.1, 4.2, 7.2), :mod:`.consistency`
(Sec. 5), :mod:`.counting`, :mod:`.mechanism` (Secs. 3, 6) and :mod:`.release`.
"""

from dpcube.mechanisms.datacube.mechanism import (
    CubeBoundCandidates,
    CubeSource,
    DataCube,
    cube_bound_candidates,
)
from dpcube.mechanisms.datacube.release import CuboidRelease, DerivedCuboid

__all__ = [
    "CubeBoundCandidates",
    "CubeSource",
    "CuboidRelease",
    "DataCube",
    "DerivedCuboid",
    "cube_bound_candidates",
]
