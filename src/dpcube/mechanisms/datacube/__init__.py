"""DP data cubes: cuboid selection (BMax, PMost) and consistency (Ding, Winslett, Han, Li 2011).

See ``docs/datacube.md``; the modules follow the spec ``dp-data-cubes.md``:
:mod:`.lattice` (section 1), :mod:`.selection` (sections 3, 4, 8.2), :mod:`.consistency`
(section 5), :mod:`.counting` (2.4), :mod:`.mechanism` (2, 6) and :mod:`.release`.
"""

from dpcube.mechanisms.datacube.mechanism import CubeSource, DataCube
from dpcube.mechanisms.datacube.release import CuboidRelease, DerivedCuboid

__all__ = ["CubeSource", "CuboidRelease", "DataCube", "DerivedCuboid"]
