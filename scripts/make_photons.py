"""Write the photon recordings topologies/photon-survey.yaml replays (topologies/data/photons-*.csv).

Each telescope records photon events for 60 s: detection time ``t`` (s, the replay's time column, Poisson
arrivals), sky position ``ra``/``dec`` (degrees), ``energy`` (GeV, a power law of index 2 above 0.1 GeV,
cut at 100 GeV) and ``region``, the sky cell the position falls in (12 x 6 cells of 30 x 30 degrees,
numbered ``ra // 30 + 12 * ((dec + 90) // 30)``), as a survey's pipeline tags each event.  A third of a
telescope's photons come from the bright sources in its field (scattered by its point spread), the rest
from the diffuse sky over its field.  Seeded: running it again writes the very same files.

    python scripts/make_photons.py [OUT_DIR]      # default: topologies/data
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

DURATION = 60.0
# telescope: (mean rate per s, field: ra range, dec range, bright sources (ra, dec), point spread in degrees)
TELESCOPES = {
    "north": (400.0, (0.0, 180.0), (0.0, 90.0), [(83.6, 22.0), (98.5, 17.8), (166.1, 38.2)], 1.5),
    "south": (300.0, (60.0, 300.0), (-90.0, 0.0), [(128.8, -45.2), (266.4, -29.0), (80.9, -69.8)], 2.0),
    "equator": (250.0, (150.0, 330.0), (-30.0, 45.0), [(194.0, -5.8), (299.6, 35.2), (266.4, -29.0)], 1.0),
}


def photons(seed: int, rate: float, ra_range, dec_range, sources, spread: float) -> np.ndarray:
    """The events of one telescope, in time order, as rows (t, ra, dec, energy, region)."""
    rng = np.random.default_rng(seed)
    times = np.cumsum(rng.exponential(1.0 / rate, int(rate * DURATION * 1.2)))
    times = times[times < DURATION]
    n = len(times)
    from_source = rng.random(n) < 1 / 3
    which = rng.integers(0, len(sources), n)
    centre = np.array(sources, dtype=float)[which]
    ra = np.where(from_source, centre[:, 0] + rng.normal(0, spread, n), rng.uniform(*ra_range, n))
    # the diffuse sky uniform on the sphere over the field's declinations
    lo, hi = np.sin(np.radians(dec_range))
    diffuse_dec = np.degrees(np.arcsin(rng.uniform(lo, hi, n)))
    dec = np.where(from_source, centre[:, 1] + rng.normal(0, spread, n), diffuse_dec)
    ra, dec = np.mod(ra, 360.0), np.clip(dec, -90.0, 90.0)
    energy = np.minimum(0.1 / (1 - rng.random(n)), 100.0)  # density ~ E^-2 above 0.1 GeV
    region = np.floor(ra / 30) + 12 * np.minimum(np.floor((dec + 90) / 30), 5)
    return np.column_stack([times, np.round(ra, 3), np.round(dec, 3), np.round(energy, 4), region])


def main(out: Path) -> None:
    for seed, (name, (rate, ra_range, dec_range, sources, spread)) in enumerate(TELESCOPES.items()):
        rows = photons(seed, rate, ra_range, dec_range, sources, spread)
        path = out / f"photons-{name}.csv"
        with path.open("w") as f:
            f.write("t,ra,dec,energy,region\n")
            for t, ra, dec, energy, region in rows:
                f.write(f"{t:.6f},{ra:g},{dec:g},{energy:g},{int(region)}\n")
        print(f"{path}: {len(rows):,} photons")


if __name__ == "__main__":
    main(Path(sys.argv[1]) if len(sys.argv) > 1 else Path(__file__).resolve().parent.parent / "topologies" / "data")
