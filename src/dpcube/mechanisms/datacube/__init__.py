"""DP data cubes: cuboid selection (BMax, PMost) and consistency (Ding, Winslett, Han, Li,
"Differentially Private Data Cubes: Optimizing Noise Sources and Consistency", SIGMOD 2011).

See ``docs/datacube.md``; the modules follow the paper:
:mod:`.lattice` (Sec. 2), :mod:`.selection` (Secs. 4.1, 4.2, 7.2), :mod:`.consistency`
(Sec. 5), :mod:`.counting`, :mod:`.mechanism` (Secs. 3, 6) and :mod:`.release`.
"""

from dpcube.mechanisms.datacube.mechanism import CubeSource, DataCube
from dpcube.mechanisms.datacube.release import CuboidRelease, DerivedCuboid

__all__ = ["CubeSource", "CuboidRelease", "DataCube", "DerivedCuboid"]
