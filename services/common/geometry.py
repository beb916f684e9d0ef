"""GEOMETRY values (Milvus 2.6.4): Well-Known Text in and out, GEOS predicates in filters.

Rows are kept as WKT text, normalized once at insert (``POINT (1 2)`` whatever spacing or
case the client sent), so the channels, binlogs and query nodes carry them as they carry
VARCHAR rows. Filters parse a column into shapely geometries (GEOS, the library Milvus
evaluates them with) and run the operator vectorised over it:

- ``ST_EQUALS``, ``ST_TOUCHES``, ``ST_OVERLAPS``, ``ST_CROSSES``, ``ST_CONTAINS``,
  ``ST_INTERSECTS``, ``ST_WITHIN`` (field, 'wkt'): the row's geometry related to the
  query's, GEOS's DE-9IM predicates;
- ``ST_DWITHIN(field, 'POINT (lon lat)', meters)``: as Milvus measures it, the great-circle
  (haversine) distance from a row's point, and for other geometries their planar distance in
  degrees scaled to meters at the query point's latitude;
- ``ST_ISVALID(field)``: GEOS validity (a self-intersecting polygon is not valid).

A null row is unknown to every operator, as in Milvus.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np
import shapely
from shapely import Geometry

#: the operators of two geometries: the row's first, the query's second
RELATIONS: dict[str, Callable[[np.ndarray, shapely.Geometry], np.ndarray]] = {
    "st_equals": shapely.equals,
    "st_touches": shapely.touches,
    "st_overlaps": shapely.overlaps,
    "st_crosses": shapely.crosses,
    "st_contains": shapely.contains,
    "st_intersects": shapely.intersects,
    "st_within": shapely.within,
}
#: Milvus's figures for ST_DWITHIN (segcore's Geometry::dwithin)
EARTH_RADIUS_M = 6_371_000.0
METERS_PER_DEGREE_LAT = 111_320.0


class GeometryError(ValueError):
    """A WKT text that is no geometry."""


def parse(text: str) -> shapely.Geometry:
    """One WKT text as a geometry, or a clear error."""
    try:
        geometry = shapely.from_wkt(text)
    except shapely.errors.GEOSException as exc:
        raise GeometryError(f"invalid WKT {text[:80]!r}: {exc}") from None
    if geometry is None:
        raise GeometryError(f"invalid WKT {text[:80]!r}")
    return geometry


def normalized(texts: Sequence[str]) -> list[str]:
    """Clients' WKT texts as Vectide stores and returns them (GEOS's WKT, full precision);
    the first text that is no geometry raises, naming it."""
    geometries = shapely.from_wkt(np.asarray(texts, dtype=object), on_invalid="ignore")
    for text, geometry in zip(texts, geometries, strict=True):
        if geometry is None:
            parse(text)  # raises with GEOS's reason
    return _wkt(geometries)


def wkt_of_wkb(blobs: Sequence[bytes]) -> list[str]:
    """Well-Known Binary rows as the WKT ``normalized`` stores (one parse, no round trip
    through text)."""
    try:
        geometries = shapely.from_wkb(np.asarray(blobs, dtype=object))
    except shapely.errors.GEOSException as exc:
        raise GeometryError(f"invalid WKB: {exc}") from None
    return _wkt(geometries)


def _wkt(geometries: np.ndarray) -> list[str]:
    return shapely.to_wkt(geometries, rounding_precision=-1).tolist()


def column(texts: Sequence[str]) -> np.ndarray:
    """Stored rows as geometries; a null row's placeholder ("") becomes None."""
    return shapely.from_wkt(np.asarray(texts, dtype=object), on_invalid="ignore")


def memory_bytes(row: shapely.Geometry | None) -> int:
    """What a parsed row holds: its Python object, GEOS's geometry objects and coordinates
    (an estimate: within about a quarter of the RSS growth measured for points and
    polygons)."""
    if row is None:
        return 16
    parts = 0 if row.geom_type == "Point" else 112  # a line's or ring's own GEOS object
    return 176 + parts + 24 * int(shapely.get_num_coordinates(row))


def relate(op: str, rows: np.ndarray, query: shapely.Geometry) -> np.ndarray:
    """Rows where ``op(row, query)`` holds."""
    return np.asarray(RELATIONS[op](rows, query), dtype=bool)


def dwithin(rows: np.ndarray, point: shapely.Point, meters: float) -> np.ndarray:
    """Rows within ``meters`` of ``point`` (longitude, latitude), measured as Milvus does."""
    lon, lat = point.x, point.y
    kinds = shapely.get_type_id(rows)
    points = kinds == shapely.GeometryType.POINT
    out = np.zeros(len(rows), dtype=bool)
    if points.any():
        xs, ys = shapely.get_x(rows[points]), shapely.get_y(rows[points])
        out[points] = haversine_m(ys, xs, lat, lon) <= meters
    others = ~points & (kinds >= 0)  # None rows have type id -1
    if others.any():
        degrees = shapely.distance(rows[others], point)
        out[others] = degrees * planar_meters_per_degree(lat) <= meters
    return out


def planar_meters_per_degree(lat: float) -> float:
    """How Milvus turns a planar distance in degrees into meters near latitude ``lat``."""
    return METERS_PER_DEGREE_LAT * float(np.sqrt((1.0 + np.cos(np.radians(lat)) ** 2) / 2.0))


def evaluate(
    op: str, rows: np.ndarray, query: Geometry | None, distance: float = 0.0
) -> np.ndarray:
    """Rows where the operator holds (``st_isvalid`` reads no query)."""
    if op == "st_isvalid":
        return is_valid(rows)
    if op == "st_dwithin":
        return dwithin(rows, query, distance)
    return relate(op, rows, query)


def search_box(op: str, query: Geometry | None, distance: float = 0.0) -> Geometry | None:
    """A shape every row the operator can hold on has its bounding box meet (an RTREE's
    candidates), or None when that is every row. The relations all need the row to meet the
    query. For ST_DWITHIN a point row within the distance is within that many meters along
    a meridian (degrees of latitude) and along the parallel of the farthest latitude its
    great circle can reach (degrees of longitude); another row is within the distance over
    Milvus's meters per degree, in the plane. Near a pole, or across the antimeridian, every
    row is a candidate."""
    if op == "st_isvalid":
        return None
    if op != "st_dwithin":
        return query
    lat = query.y
    meters_per_degree = np.pi / 180 * EARTH_RADIUS_M  # along a great circle
    dlat = distance / meters_per_degree
    edge = min(90.0, abs(lat) + dlat)
    if edge >= 89.0:
        return None  # near a pole every longitude is close
    dlon = distance / (meters_per_degree * np.cos(np.radians(edge)))
    reach = max(distance / planar_meters_per_degree(lat), dlat, dlon)
    if not -180.0 <= query.x - reach <= query.x + reach <= 180.0:
        return None  # the circle wraps around the antimeridian: a box cannot hold it
    return shapely.box(query.x - reach, lat - reach, query.x + reach, lat + reach)


def haversine_m(lat1: np.ndarray, lon1: np.ndarray, lat2: float, lon2: float) -> np.ndarray:
    """Great-circle distances in meters on Milvus's sphere (radius 6,371 km)."""
    p1, p2 = np.radians(lat1), np.radians(lat2)
    dlat, dlon = p2 - p1, np.radians(lon2) - np.radians(lon1)
    a = np.sin(dlat / 2) ** 2 + np.cos(p1) * np.cos(p2) * np.sin(dlon / 2) ** 2
    return EARTH_RADIUS_M * 2 * np.arctan2(np.sqrt(a), np.sqrt(1 - a))


def is_valid(rows: np.ndarray) -> np.ndarray:
    return np.asarray(shapely.is_valid(rows), dtype=bool)
