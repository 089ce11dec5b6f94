//! The map's clusters: the devices of the community map grouped by zoom level, so that a view of
//! the world is a few hundred features instead of one marker per device (a page drawing 100,000
//! markers is unreadable and slow, and a feed of them is megabytes per poll).
//!
//! **Grid clustering in Web-Mercator pixel space.** At zoom `z` the world is `256 · 2^z` pixels
//! wide; a cell is [`CELL_PIXELS`] (64) pixels square, which is exactly a map tile of zoom
//! `z + 2`. So cells nest: each cell of zoom `z + 1` lies in one cell of zoom `z`, and clusters
//! only ever split as the zoom grows. From zoom [`SINGLE_FROM`] (16) on, every device is its own
//! feature.
//!
//! **Computed once per cache period, not per request.** A [`ClusterIndex`] lives beside the
//! entries of one generation of the map cache (`http::cacheable::MapCache`). On first use it
//! projects every entry once and sorts them by the Morton (Z-order) code of their zoom-15 cell
//! (tile level 17): every cell of every zoom is then a contiguous run of that order, so the grid
//! of a zoom is one linear pass over it, computed at the first request for that zoom and kept for
//! the generation. A bounding box is applied to those pre-computed cells: a cell whose devices all
//! lie inside keeps its aggregate, one entirely outside is skipped, and only a cell the box's edge
//! cuts is summarised again from its devices inside, so the counts are exactly those of the map
//! feed in the same box. A device made private, hidden or deleted invalidates the map cache, and
//! with it this index.
//!
//! **Why a grid and not a hierarchy.** A supercluster-style hierarchy (greedy radius merging over
//! a k-d tree, zoom by zoom) draws rounder clusters without grid seams, but costs a spatial index
//! and `O(n log n)` per zoom; the grid is a sort and a linear pass, and nests by construction
//! (bench/RESULTS.md, "map", has the figures at 100,000 devices).
//!
//! A cluster's point is the mean of its devices' positions (never across the antimeridian: a cell
//! never spans it), so it lies among them and, with a box, inside the box.

use std::f64::consts::PI;
use std::ops::Range;
use std::sync::OnceLock;

use super::map::MapEntry;
use crate::domain::{BoundingBox, Coverage, Status, Zoom};

/// A cell's edge in screen pixels at its zoom.
pub const CELL_PIXELS: u32 = 256 >> CELL_SHIFT;
/// A cell at zoom `z` is a map tile of zoom `z + CELL_SHIFT`.
const CELL_SHIFT: u8 = 2;
/// From this zoom on, every device is its own feature.
pub const SINGLE_FROM: u8 = 16;
/// Bits per axis of the finest cells (those of zoom `SINGLE_FROM - 1`).
const BITS: u8 = SINGLE_FROM - 1 + CELL_SHIFT;
/// Web Mercator's latitude limit: positions beyond it are placed on its edge.
const MAX_LAT: f64 = 85.051_128_779_806_59;

/// The zoom whose clusters answer `zoom`: every zoom from [`SINGLE_FROM`] on has the same
/// features (one per device), so they share one cache variant.
pub fn effective(zoom: Zoom) -> u8 {
    zoom.get().min(SINGLE_FROM)
}

/// What a cluster says about its devices.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Summary {
    /// How many devices (≥ 1).
    pub count: usize,
    /// Mean longitude of their positions.
    pub lon: f64,
    /// Mean latitude of their positions.
    pub lat: f64,
    /// The highest AQI among them.
    pub aqi_max: i64,
    /// Their median AQI: for an even count the lower of the two middle values (always one
    /// device's AQI, an integer).
    pub aqi_median: i64,
    /// How many of them are offline.
    pub offline: usize,
}

/// One feature of the clusters feed: a summary, and the device when it stands for one.
#[derive(Debug, Clone, Copy)]
pub struct Cluster<'e> {
    /// Its devices in figures.
    pub summary: Summary,
    /// The device itself, when `summary.count` is 1.
    pub single: Option<&'e MapEntry>,
}

/// An entry's place in the Z-order of the finest cells, with the figures a summary needs, so
/// that the grid passes read one compact sorted array and never the entries themselves.
#[derive(Debug, Clone, Copy)]
struct Placed {
    code: u64,
    entry: usize,
    lat: f64,
    lon: f64,
    aqi: i64,
    offline: bool,
}

/// One cell of a zoom's grid.
#[derive(Debug, Clone)]
struct Cell {
    /// Its devices: a run of the index's order.
    members: Range<usize>,
    summary: Summary,
    /// `[west, south, east, north]` of its devices' positions.
    extent: [f64; 4],
}

/// The clusters of one generation of map entries, computed lazily once per zoom.
#[derive(Debug, Default)]
pub struct ClusterIndex {
    order: OnceLock<Vec<Placed>>,
    grids: [OnceLock<Vec<Cell>>; SINGLE_FROM as usize],
}

impl ClusterIndex {
    /// The clusters of `entries` at `zoom`, only of the devices inside `bbox` (all without one),
    /// in the cells' Z-order. `entries` must be the generation's entries this index belongs to.
    pub fn clusters<'e>(
        &self,
        entries: &'e [MapEntry],
        zoom: Zoom,
        bbox: Option<BoundingBox>,
    ) -> Vec<Cluster<'e>> {
        let order = self.order.get_or_init(|| place(entries));
        let inside =
            |placed: &&Placed| bbox.is_none_or(|bbox| bbox.contains(placed.lat, placed.lon));
        let level = effective(zoom);
        let Some(grid) = self.grids.get(usize::from(level)) else {
            return order
                .iter()
                .filter(inside)
                .filter_map(|placed| entries.get(placed.entry))
                .map(Cluster::single)
                .collect();
        };
        let grid = grid.get_or_init(|| cells(order, level));
        let mut clusters = Vec::new();
        let mut scratch = Vec::new();
        for cell in grid {
            let coverage = bbox.map_or(Coverage::Inside, |bbox| bbox.coverage(cell.extent));
            let members = || order.get(cell.members.clone()).unwrap_or_default().iter();
            let summary = match coverage {
                Coverage::Outside => continue,
                Coverage::Inside => Some(cell.summary),
                Coverage::Partly => summarise(members().filter(inside), &mut scratch),
            };
            let Some(summary) = summary else { continue };
            let single = if summary.count == 1 {
                members()
                    .find(inside)
                    .and_then(|placed| entries.get(placed.entry))
            } else {
                None
            };
            clusters.push(Cluster { summary, single });
        }
        clusters
    }
}

impl<'e> Cluster<'e> {
    fn single(entry: &'e MapEntry) -> Self {
        let aqi = entry.latest.aqi;
        Self {
            summary: Summary {
                count: 1,
                lon: entry.latest.position.lon,
                lat: entry.latest.position.lat,
                aqi_max: aqi,
                aqi_median: aqi,
                offline: usize::from(entry.status == Status::Offline),
            },
            single: Some(entry),
        }
    }
}

/// Every entry with its code, in Z-order (ties in the entries' order, so that equal entries give
/// an equal feed, and an equal entity tag, in every cache period).
fn place(entries: &[MapEntry]) -> Vec<Placed> {
    let mut order: Vec<Placed> = entries
        .iter()
        .enumerate()
        .map(|(entry, map_entry)| {
            let (lat, lon) = (map_entry.latest.position.lat, map_entry.latest.position.lon);
            Placed {
                code: code(lat, lon),
                entry,
                lat,
                lon,
                aqi: map_entry.latest.aqi,
                offline: map_entry.status == Status::Offline,
            }
        })
        .collect();
    order.sort_unstable_by_key(|placed| (placed.code, placed.entry));
    order
}

/// The grid of zoom `level` (below [`SINGLE_FROM`]): one cell per run of equal cell keys.
fn cells(order: &[Placed], level: u8) -> Vec<Cell> {
    let shift = 2 * u32::from(BITS - (level + CELL_SHIFT));
    let mut grid = Vec::new();
    let mut aqis = Vec::new();
    let mut start = 0;
    while let Some(first) = order.get(start) {
        let key = first.code >> shift;
        let run = order.get(start..).unwrap_or_default();
        let len = run
            .iter()
            .take_while(|placed| placed.code >> shift == key)
            .count();
        let devices = run.get(..len).unwrap_or_default();
        if let Some(summary) = summarise(devices.iter(), &mut aqis) {
            let mut extent = [
                f64::INFINITY,
                f64::INFINITY,
                f64::NEG_INFINITY,
                f64::NEG_INFINITY,
            ];
            for placed in devices {
                extent = [
                    extent[0].min(placed.lon),
                    extent[1].min(placed.lat),
                    extent[2].max(placed.lon),
                    extent[3].max(placed.lat),
                ];
            }
            grid.push(Cell {
                members: start..start + len,
                summary,
                extent,
            });
        }
        start += len.max(1);
    }
    grid
}

/// The summary of some devices; `None` when there are none. `aqis` is scratch space, reused
/// across the cells of a grid (one allocation per grid, not per cell).
fn summarise<'p>(
    devices: impl Iterator<Item = &'p Placed>,
    aqis: &mut Vec<i64>,
) -> Option<Summary> {
    aqis.clear();
    let (mut lon, mut lat, mut offline) = (0.0, 0.0, 0);
    for placed in devices {
        aqis.push(placed.aqi);
        lon += placed.lon;
        lat += placed.lat;
        offline += usize::from(placed.offline);
    }
    let count = aqis.len();
    let aqi_max = aqis.iter().copied().max()?;
    let (_, &mut aqi_median, _) = aqis.select_nth_unstable((count - 1) / 2);
    // A mean of one position is that position, bit for bit.
    let mean = |sum: f64| if count == 1 { sum } else { sum / count as f64 };
    Some(Summary {
        count,
        lon: mean(lon),
        lat: mean(lat),
        aqi_max,
        aqi_median,
        offline,
    })
}

/// The Morton code of the finest cell holding (`lat`, `lon`): x and y of the Web-Mercator tile
/// of level [`BITS`], their bits interleaved (x in the even bits).
fn code(lat: f64, lon: f64) -> u64 {
    let side = f64::from(1u32 << BITS);
    let x = (lon + 180.0) / 360.0;
    let lat = lat.clamp(-MAX_LAT, MAX_LAT).to_radians();
    let y = (1.0 - lat.tan().asinh() / PI) / 2.0;
    // In range by the clamp (a position on the east or south edge joins the last cell); a NaN
    // cannot come from the store, and would land in cell 0.
    let tile = |v: f64| (v * side).floor().clamp(0.0, side - 1.0) as u32;
    spread(tile(x)) | (spread(tile(y)) << 1)
}

/// The bits of `v` spread to the even bit positions.
fn spread(v: u32) -> u64 {
    let mut v = u64::from(v);
    v = (v | (v << 16)) & 0x0000_ffff_0000_ffff;
    v = (v | (v << 8)) & 0x00ff_00ff_00ff_00ff;
    v = (v | (v << 4)) & 0x0f0f_0f0f_0f0f_0f0f;
    v = (v | (v << 2)) & 0x3333_3333_3333_3333;
    (v | (v << 1)) & 0x5555_5555_5555_5555
}

#[cfg(test)]
mod tests {
    use chrono::{DateTime, Utc};

    use super::*;
    use crate::domain::{DeviceName, DeviceUuid, LatestLocated, LocatedAt};
    use crate::read::map::MapMember;

    fn zoom(level: u8) -> Zoom {
        Zoom::parse(Some(&level.to_string())).expect("a zoom")
    }

    fn bbox(text: &str) -> Option<BoundingBox> {
        Some(BoundingBox::parse(text).expect("a box"))
    }

    fn entry(aqi: i64, lat: f64, lon: f64, status: Status) -> MapEntry {
        let at: DateTime<Utc> = DateTime::UNIX_EPOCH;
        MapEntry {
            device: std::sync::Arc::new(MapMember {
                id: DeviceUuid::generate(),
                name: DeviceName::from_stored(format!("aqi {aqi}")),
                is_outdoor: true,
            }),
            latest: std::sync::Arc::new(LatestLocated {
                position: LocatedAt {
                    lat,
                    lon,
                    provider: "gps".to_owned(),
                    at,
                },
                aqi,
                pm2_5: 1.0,
                temperature: 1.0,
            }),
            status,
        }
    }

    /// `count` entries spread over the world (a fixed pseudo-random sequence), a third of them
    /// in a few dense towns.
    fn world(count: usize) -> Vec<MapEntry> {
        let mut state = 0x2545_f491_4f6c_dd1d_u64;
        let mut next = move || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            (state >> 11) as f64 / (1u64 << 53) as f64
        };
        (0..count)
            .map(|i| {
                let (lat, lon) = if i % 3 == 0 {
                    let town = [(52.52, 13.405), (-33.9, 151.2), (0.0, 179.99)][i % 9 / 3];
                    (town.0 + next() * 0.05, (town.1 + next() * 0.05).min(180.0))
                } else {
                    (next() * 170.0 - 85.0, next() * 360.0 - 180.0)
                };
                let status = if i % 4 == 0 {
                    Status::Offline
                } else {
                    Status::Online
                };
                entry((next() * 300.0) as i64, lat, lon, status)
            })
            .collect()
    }

    #[test]
    fn spread_interleaves() {
        assert_eq!(spread(0b1011), 0b100_0101);
        assert_eq!(spread(u32::from(u16::MAX)), 0x5555_5555);
    }

    #[test]
    fn codes_place_the_corners_and_zoom_0_has_16_cells() {
        // Zoom 0: 4 × 4 cells; Berlin is in cell (2, 1).
        let shift = 2 * u32::from(BITS - CELL_SHIFT);
        assert_eq!(code(52.52, 13.405) >> shift, spread(2) | (spread(1) << 1));
        let last = (1u64 << (2 * u32::from(BITS))) - 1;
        assert_eq!(code(-90.0, 180.0), last, "south-east corner: the last cell");
        assert_eq!(code(90.0, -180.0), 0, "north-west corner: the first cell");
        let entries = world(3000);
        let index = ClusterIndex::default();
        assert_eq!(index.clusters(&entries, zoom(0), None).len(), 16);
    }

    #[test]
    fn a_summary_has_count_max_lower_median_offline_and_mean_position() {
        let entries = [
            entry(10, 1.0, 2.0, Status::Online),
            entry(50, 3.0, 4.0, Status::Offline),
            entry(30, 2.0, 3.0, Status::Online),
            entry(40, 2.0, 3.0, Status::Offline),
        ];
        let placed = place(&entries);
        let summary = summarise(placed.iter(), &mut Vec::new()).expect("a summary");
        assert_eq!(
            summary,
            Summary {
                count: 4,
                lon: 3.0,
                lat: 2.0,
                aqi_max: 50,
                aqi_median: 30,
                offline: 2
            }
        );
        assert_eq!(
            summarise(placed.iter().filter(|p| p.entry < 3), &mut Vec::new()).map(|s| s.aqi_median),
            Some(30)
        );
        assert_eq!(summarise(placed.iter().take(0), &mut Vec::new()), None);
    }

    #[test]
    fn counts_add_up_to_the_devices_in_the_box_at_every_zoom() {
        let entries = world(3000);
        let index = ClusterIndex::default();
        for bbox in [
            None,
            bbox("13.3,52.4,13.5,52.6"),
            bbox("-10,-30,60,55.5"),
            bbox("170,-10,-170,10"),
            bbox("179.995,-1,-179.9,1"),
            bbox("100,50,100,50"),
        ] {
            let inside: Vec<&MapEntry> = super::super::map::within(&entries, bbox).collect();
            let mut previous = 0;
            for level in 0..=Zoom::MAX {
                let clusters = index.clusters(&entries, zoom(level), bbox);
                let total: usize = clusters.iter().map(|c| c.summary.count).sum();
                assert_eq!(total, inside.len(), "zoom {level}, {bbox:?}");
                let offline: usize = clusters.iter().map(|c| c.summary.offline).sum();
                let expected = inside
                    .iter()
                    .filter(|e| e.status == Status::Offline)
                    .count();
                assert_eq!(offline, expected, "zoom {level}, {bbox:?}");
                assert!(clusters.len() >= previous, "finer with zoom: {level}");
                previous = clusters.len();
                for cluster in &clusters {
                    let s = cluster.summary;
                    assert!(s.count >= 1);
                    assert_eq!(cluster.single.is_some(), s.count == 1);
                    assert!(s.aqi_median <= s.aqi_max);
                    if let Some(bbox) = bbox {
                        assert!(bbox.contains(s.lat, s.lon), "the point is inside the box");
                    }
                }
                if level >= SINGLE_FROM {
                    assert_eq!(clusters.len(), inside.len(), "one feature per device");
                }
            }
        }
    }

    #[test]
    fn the_same_entries_give_the_same_clusters_in_the_same_order() {
        let entries = world(500);
        let first = ClusterIndex::default().clusters(&entries, zoom(5), None);
        let again = ClusterIndex::default().clusters(&entries, zoom(5), None);
        assert_eq!(
            first.iter().map(|c| c.summary).collect::<Vec<_>>(),
            again.iter().map(|c| c.summary).collect::<Vec<_>>()
        );
    }
}
