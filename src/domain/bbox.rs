//! The map's bounding box: `minLon,minLat,maxLon,maxLat` in degrees, parsed at the edge.
//!
//! Edges are included. `minLat ≤ maxLat` always; `minLon > maxLon` is a box that crosses the
//! antimeridian (from `minLon` east to 180, then from −180 east to `maxLon`).

use super::field_errors::{Code, FieldErrors, In};

/// The query parameter's name.
pub const PARAMETER: &str = "bbox";

/// A valid bounding box.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct BoundingBox {
    min_lon: f64,
    min_lat: f64,
    max_lon: f64,
    max_lat: f64,
}

impl BoundingBox {
    /// Parses `minLon,minLat,maxLon,maxLat`: four plain decimals (`-?(0|[1-9][0-9]*)(.[0-9]+)?`,
    /// no exponent, sign `+` or spaces, so that the OpenAPI document's pattern describes exactly
    /// what is accepted), longitudes in −180..=180, latitudes in −90..=90, `minLat ≤ maxLat`.
    pub fn parse(text: &str) -> Result<Self, FieldErrors> {
        let refuse = |code: Code, detail: String| {
            Err(FieldErrors::single(In::Query, PARAMETER, code, detail))
        };
        let numbers: Vec<Option<f64>> = text.split(',').map(decimal).collect();
        let [Some(min_lon), Some(min_lat), Some(max_lon), Some(max_lat)] = numbers[..] else {
            return refuse(
                Code::Format,
                format!("`bbox` must be four numbers minLon,minLat,maxLon,maxLat, not {text:?}"),
            );
        };
        for (value, limit, what) in [
            (min_lon, 180.0, "longitudes"),
            (min_lat, 90.0, "latitudes"),
            (max_lon, 180.0, "longitudes"),
            (max_lat, 90.0, "latitudes"),
        ] {
            if value < -limit {
                return refuse(
                    Code::Minimum,
                    format!("`bbox` {what} must be at least -{limit}, not {value}"),
                );
            }
            if value > limit {
                return refuse(
                    Code::Maximum,
                    format!("`bbox` {what} must be at most {limit}, not {value}"),
                );
            }
        }
        if min_lat > max_lat {
            return refuse(
                Code::Range,
                format!("`bbox` minLat ({min_lat}) must not be above maxLat ({max_lat})"),
            );
        }
        // −0 and 0 are the same edge (and the same cache key).
        Ok(Self {
            min_lon: min_lon + 0.0,
            min_lat: min_lat + 0.0,
            max_lon: max_lon + 0.0,
            max_lat: max_lat + 0.0,
        })
    }

    /// Whether the position lies inside, edges included.
    pub fn contains(&self, lat: f64, lon: f64) -> bool {
        let lat_inside = self.min_lat <= lat && lat <= self.max_lat;
        let lon_inside = if self.min_lon <= self.max_lon {
            self.min_lon <= lon && lon <= self.max_lon
        } else {
            lon >= self.min_lon || lon <= self.max_lon
        };
        lat_inside && lon_inside
    }

    /// Where the positions spanning `extent` (`[west, south, east, north]`, west ≤ east: a span
    /// that does not cross the antimeridian) lie against this box: all inside, all outside, or
    /// either (then only a look at each position tells).
    pub fn coverage(&self, extent: [f64; 4]) -> Coverage {
        let [west, south, east, north] = extent;
        if north < self.min_lat || south > self.max_lat {
            return Coverage::Outside;
        }
        let lat_inside = self.min_lat <= south && north <= self.max_lat;
        // A box across the antimeridian is two spans of longitude; an extent lies in one or the
        // other, or overlaps one, or neither.
        let spans: &[(f64, f64)] = if self.min_lon <= self.max_lon {
            &[(self.min_lon, self.max_lon)]
        } else {
            &[(self.min_lon, 180.0), (-180.0, self.max_lon)]
        };
        let lon_inside = spans.iter().any(|&(from, to)| from <= west && east <= to);
        let lon_touches = spans.iter().any(|&(from, to)| west <= to && from <= east);
        if !lon_touches {
            Coverage::Outside
        } else if lon_inside && lat_inside {
            Coverage::Inside
        } else {
            Coverage::Partly
        }
    }

    /// The box as hashable bits (equal boxes, equal keys), for caches.
    pub fn key(&self) -> [u64; 4] {
        [self.min_lon, self.min_lat, self.max_lon, self.max_lat].map(f64::to_bits)
    }
}

/// How a set of positions lies against a box ([`BoundingBox::coverage`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Coverage {
    /// Every position is inside.
    Inside,
    /// No position is inside.
    Outside,
    /// Some may be, some may not.
    Partly,
}

/// A plain decimal: `-?(0|[1-9][0-9]*)(.[0-9]+)?`.
fn decimal(text: &str) -> Option<f64> {
    let unsigned = text.strip_prefix('-').unwrap_or(text);
    let (whole, fraction) = match unsigned.split_once('.') {
        Some((whole, fraction)) => (whole, Some(fraction)),
        None => (unsigned, None),
    };
    let digits = |part: &str| !part.is_empty() && part.bytes().all(|b| b.is_ascii_digit());
    let plain =
        digits(whole) && (whole == "0" || !whole.starts_with('0')) && fraction.is_none_or(digits);
    plain.then(|| text.parse::<f64>().ok()).flatten()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn code(text: &str) -> Option<Code> {
        BoundingBox::parse(text)
            .err()
            .and_then(|errors| errors.as_slice().first().map(|error| error.code))
    }

    #[test]
    fn four_numbers_in_range_parse() {
        assert!(BoundingBox::parse("-10,40.5,20,60").is_ok());
        assert!(BoundingBox::parse("-180,-90,180,90").is_ok());
        assert!(BoundingBox::parse("-0,0.25,179.999,-0.0").is_err());
        assert!(BoundingBox::parse("-0,-0.25,179.999,0.0").is_ok());
        assert!(
            BoundingBox::parse("170,-10,-170,10").is_ok(),
            "antimeridian"
        );
    }

    #[test]
    fn anything_else_is_refused_with_its_code() {
        for text in [
            "",
            "1,2,3",
            "1,2,3,4,5",
            "a,2,3,4",
            "NaN,0,1,1",
            "inf,0,1,1",
            "1,,3,4",
            " -180 , -90 , 180 , 90 ",
            "1e1,0,1,1",
            "+1,0,1,1",
            "01,0,1,1",
            "1.,0,1,1",
            ".5,0,1,1",
        ] {
            assert_eq!(code(text), Some(Code::Format), "{text:?}");
        }
        assert_eq!(code("-181,0,10,10"), Some(Code::Minimum));
        assert_eq!(code("0,-91,10,10"), Some(Code::Minimum));
        assert_eq!(code("0,0,180.5,10"), Some(Code::Maximum));
        assert_eq!(code("0,0,10,90.1"), Some(Code::Maximum));
        assert_eq!(code("0,20,10,10"), Some(Code::Range));
    }

    #[test]
    fn edges_are_inside() -> Result<(), FieldErrors> {
        let bbox = BoundingBox::parse("0,10,20,30")?;
        assert!(bbox.contains(10.0, 0.0) && bbox.contains(30.0, 20.0));
        assert!(bbox.contains(20.0, 10.0));
        assert!(!bbox.contains(9.999, 10.0) && !bbox.contains(20.0, 20.001));
        Ok(())
    }

    #[test]
    fn a_box_across_the_antimeridian_wraps() -> Result<(), FieldErrors> {
        let bbox = BoundingBox::parse("170,-10,-170,10")?;
        for lon in [170.0, 179.9, 180.0, -180.0, -175.0, -170.0] {
            assert!(bbox.contains(0.0, lon), "{lon}");
        }
        for lon in [169.9, 0.0, -169.9] {
            assert!(!bbox.contains(0.0, lon), "{lon}");
        }
        Ok(())
    }

    #[test]
    fn coverage_of_an_extent() -> Result<(), FieldErrors> {
        let bbox = BoundingBox::parse("0,10,20,30")?;
        assert_eq!(bbox.coverage([0.0, 10.0, 20.0, 30.0]), Coverage::Inside);
        assert_eq!(bbox.coverage([5.0, 15.0, 5.0, 15.0]), Coverage::Inside);
        assert_eq!(bbox.coverage([-5.0, 15.0, 5.0, 20.0]), Coverage::Partly);
        assert_eq!(bbox.coverage([5.0, 25.0, 6.0, 35.0]), Coverage::Partly);
        assert_eq!(bbox.coverage([21.0, 15.0, 25.0, 20.0]), Coverage::Outside);
        assert_eq!(bbox.coverage([5.0, 31.0, 6.0, 35.0]), Coverage::Outside);
        let across = BoundingBox::parse("170,-10,-170,10")?;
        assert_eq!(across.coverage([171.0, 0.0, 180.0, 1.0]), Coverage::Inside);
        assert_eq!(
            across.coverage([-180.0, 0.0, -175.0, 1.0]),
            Coverage::Inside
        );
        assert_eq!(
            across.coverage([-175.0, 0.0, -160.0, 1.0]),
            Coverage::Partly
        );
        assert_eq!(across.coverage([0.0, 0.0, 10.0, 1.0]), Coverage::Outside);
        // Spans both pieces and the gap between them: only the positions tell.
        assert_eq!(across.coverage([-175.0, 0.0, 175.0, 1.0]), Coverage::Partly);
        Ok(())
    }

    #[test]
    fn negative_zero_is_zero() -> Result<(), FieldErrors> {
        assert_eq!(
            BoundingBox::parse("-0,-0,1,1")?.key(),
            BoundingBox::parse("0,0,1,1")?.key()
        );
        Ok(())
    }
}
