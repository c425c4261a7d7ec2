"""Regenerate the example files of ``examples/`` (synthetic, deterministic, no real data).

    python examples/make_examples.py            # rewrites every file below, byte for byte the same
    python examples/make_examples.py --check    # exit 1 if a file differs from what it would write

Every file is drawn from fixed seeds with numpy's PCG64 generator and written with fixed
formatting, so a rerun reproduces the committed files exactly (``tests/docs`` checks it). The
distributions are loosely shaped like the public data sets they stand in for (the UCI Adult
table, GPS traces, household sizes, the CPS fixed-width extract); no record of any real data set
is used.
"""

from __future__ import annotations

import argparse
import io
import json
import sys
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent

EDUCATION = ["Primary", "HighSchool", "Bachelors", "Masters", "Doctorate"]
WORKCLASS = ["Private", "SelfEmployed", "Government"]
#: nation -> states -> counties of the census example.
STATES = {"North": ["N1", "N2", "N3"], "South": ["S1", "S2", "S3"], "West": ["W1", "W2", "W3"]}
#: The bounding box of the location example (a city-sized area) and its cluster centres.
BBOX = (39.80, 116.20, 40.12, 116.52)
CENTRES = [(39.91, 116.39, 0.015), (39.99, 116.30, 0.010), (39.86, 116.45, 0.020)]
#: CPS-like fixed-width layout (1-based inclusive columns, as in ../shared/data/README.md).
CPS_STATES = ["01", "06", "13", "36", "48"]


def adult(rng: np.random.Generator, n: int = 4000) -> str:
    """A person table shaped like UCI Adult: age, sex, education, workclass, income."""
    age = np.clip(np.round(rng.gamma(6.0, 6.5, n) + 17), 17, 90).astype(int)
    sex = rng.choice(["F", "M"], n, p=[0.33, 0.67])
    education = rng.choice(EDUCATION, n, p=[0.10, 0.45, 0.30, 0.12, 0.03])
    workclass = rng.choice(WORKCLASS, n, p=[0.70, 0.12, 0.18])
    high = {"Primary": 0.03, "HighSchool": 0.15, "Bachelors": 0.40, "Masters": 0.55}
    p_high = np.array([high.get(e, 0.70) for e in education]) * np.where(age < 25, 0.2, 1.0)
    income = np.where(rng.random(n) < p_high, ">50K", "<=50K")
    out = io.StringIO()
    out.write("age,sex,education,workclass,income\n")
    for row in zip(age, sex, education, workclass, income, strict=True):
        out.write(",".join(str(x) for x in row) + "\n")
    return out.getvalue()


def points(rng: np.random.Generator, n: int = 6000, users: int = 120) -> str:
    """GPS-like points: three dense clusters over a uniform background, each from one user."""
    lat0, lon0, lat1, lon1 = BBOX
    which = rng.choice(len(CENTRES) + 1, n, p=[0.35, 0.25, 0.25, 0.15])
    lat = rng.uniform(lat0, lat1, n)
    lon = rng.uniform(lon0, lon1, n)
    for k, (clat, clon, spread) in enumerate(CENTRES):
        hit = which == k
        lat[hit] = rng.normal(clat, spread, hit.sum())
        lon[hit] = rng.normal(clon, spread * 1.3, hit.sum())
    inside = (lat >= lat0) & (lat <= lat1) & (lon >= lon0) & (lon <= lon1)
    lat, lon = lat[inside], lon[inside]
    user = rng.zipf(1.6, len(lat)) % users  # a few users contribute most points
    out = io.StringIO()
    out.write("lat,lon,user\n")
    for a, b, u in zip(lat, lon, user, strict=True):
        out.write(f"{a:.5f},{b:.5f},u{u:03d}\n")
    return out.getvalue()


def regions() -> str:
    """The region hierarchy as ``region,parent`` rows (empty parent for the root)."""
    rows = ["region,parent", "nation,"]
    rows += [f"{state},nation" for state in STATES]
    rows += [f"{county},{state}" for state, counties in STATES.items() for county in counties]
    return "\n".join(rows) + "\n"


def persons(rng: np.random.Generator, households: int = 1500) -> str:
    """One row per person: household id, county, age, sex; household sizes 1..9."""
    counties = [c for cs in STATES.values() for c in cs]
    size = 1 + rng.poisson(1.6, households)
    county = rng.choice(counties, households)
    out = io.StringIO()
    out.write("person,household,county,age,sex\n")
    person = 0
    for h in range(households):
        for _ in range(int(size[h])):
            person += 1
            age = int(rng.integers(0, 91))
            sex = "F" if rng.random() < 0.5 else "M"
            out.write(f"p{person:05d},h{h:05d},{county[h]},{age},{sex}\n")
    return out.getvalue()


def age_workload() -> str:
    """A range workload over age: the age bands a statistical office publishes, and prefixes."""
    bands = [[0, 17], [18, 24], [25, 34], [35, 44], [45, 54], [55, 64], [65, 74], [75, 127]]
    prefixes = [[0, hi] for hi in range(9, 128, 10)]
    queries = [{"age": b} for b in bands + prefixes]
    return "[\n" + ",\n".join(" " + json.dumps(q) for q in queries) + "\n]\n"


def cps_like(rng: np.random.Generator, households: int = 400) -> str:
    """A hierarchical fixed-width file in the CPS extract's layout: each household record (H)
    is followed by its person records (P).

    H: RECTYPE 1, YEAR 2-5, SERIAL 6-10, MONTH 11-12, HWTFINL 13-22, CPSID 23-36, MISH 37,
    STATEFIP 38-39. P: RECTYPE 1, YEAR 2-5, SERIAL 6-10, PERNUM 11-12, WTFINL 13-26,
    CPSIDP 27-40, AGE 41-42, SEX 43 (1 male, 2 female), RACE 44-46.
    """
    lines: list[str] = []
    for serial in range(1, households + 1):
        state = CPS_STATES[int(rng.integers(len(CPS_STATES)))]
        size = int(rng.choice(np.arange(8), p=[0.04, 0.26, 0.30, 0.16, 0.13, 0.06, 0.03, 0.02]))
        cpsid = 20210100000000 + int(rng.integers(10**6))
        weight = int(rng.integers(10**6, 10**7))
        mish = int(rng.integers(1, 9))
        lines.append(
            f"H2022{serial:05d}01{weight:010d}{cpsid:014d}{mish:1d}{state}"
        )  # a household with size 0 is vacant: no person records follow
        for pernum in range(1, size + 1):
            age = int(rng.integers(0, 86))
            sex = int(rng.integers(1, 3))
            lines.append(
                f"P2022{serial:05d}{pernum:02d}{weight * 10:014d}{cpsid:014d}{age:02d}{sex:1d}100"
            )
    return "\n".join(lines) + "\n"


CARRIERS = ["AA", "B6", "DL", "EV", "UA", "WN"]
#: Mean departure delay (minutes) of each carrier's flights, before the exponential spread.
CARRIER_DELAY = [8.0, 14.0, 5.0, 18.0, 10.0, 12.0]


def flights(rng: np.random.Generator, planes: int = 400) -> str:
    """A flights table of many rows per plane: tailnum, carrier, month, dep_delay (minutes).

    Each plane belongs to one carrier and flies between 1 and 200 flights (a skewed spread, about
    50 on average, so about 20,000 rows): the plane, not the flight, is the unit to protect.
    Delays are early departures (a few minutes) or exponential delays whose mean depends on the
    carrier and on the plane (some planes run late more often).
    """
    sizes = np.clip(np.round(rng.gamma(1.3, 40.0, planes)), 1, 200).astype(int)
    carrier = rng.choice(len(CARRIERS), planes, p=[0.2, 0.12, 0.2, 0.1, 0.2, 0.18])
    lateness = rng.gamma(2.0, 0.5, planes)
    out = io.StringIO()
    out.write("tailnum,carrier,month,dep_delay\n")
    for plane in range(planes):
        n = int(sizes[plane])
        mean = CARRIER_DELAY[int(carrier[plane])] * float(lateness[plane])
        early = rng.random(n) < 0.55
        delay = np.where(early, -rng.integers(0, 10, n), np.round(rng.exponential(mean * 2.5, n)))
        month = rng.integers(1, 13, n)
        name = f"N{plane:03d}{CARRIERS[int(carrier[plane])]}"
        for m, d in zip(month, delay, strict=True):
            out.write(f"{name},{CARRIERS[int(carrier[plane])]},{int(m)},{int(d)}\n")
    return out.getvalue()


def files() -> dict[str, str]:
    """Relative path -> content of every generated file."""
    return {
        "adult/people.csv": adult(np.random.default_rng(20240101)),
        "location/points.csv": points(np.random.default_rng(20240102)),
        "census/regions.csv": regions(),
        "census/persons.csv": persons(np.random.default_rng(20240103)),
        "workload/age_ranges.json": age_workload(),
        "fixed-width/cps_like.dat": cps_like(np.random.default_rng(20240104)),
        "flights/flights.csv": flights(np.random.default_rng(20240105)),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="compare instead of writing")
    parser.add_argument("--out", type=Path, default=HERE, help="where to write (default: here)")
    args = parser.parse_args(argv)
    stale = []
    for name, text in files().items():
        path = args.out / name
        if args.check:
            if not path.is_file() or path.read_text() != text:
                stale.append(name)
            continue
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    if stale:
        print(f"differ from the generator: {', '.join(stale)}", file=sys.stderr)
        return 1
    print("checked" if args.check else "wrote", len(files()), "files under", args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
