//! The US EPA AQI categories: which band an AQI value falls in, its name and its colour.
//!
//! Every page that shows an AQI (the map, the device page, the badge) colours it from this one
//! table, so a value is never green in one place and yellow in another. Bands and colours are
//! the EPA's (Technical Assistance Document for the Reporting of Daily Air Quality, 2018); values
//! above 500 stay "Hazardous".

/// One band of the AQI scale.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AqiCategory {
    /// 0–50.
    Good,
    /// 51–100.
    Moderate,
    /// 101–150.
    UnhealthyForSensitiveGroups,
    /// 151–200.
    Unhealthy,
    /// 201–300.
    VeryUnhealthy,
    /// 301 and above.
    Hazardous,
}

impl AqiCategory {
    /// Every band, from the cleanest air up.
    pub const ALL: [Self; 6] = [
        Self::Good,
        Self::Moderate,
        Self::UnhealthyForSensitiveGroups,
        Self::Unhealthy,
        Self::VeryUnhealthy,
        Self::Hazardous,
    ];

    /// The band of `aqi` (negative values, which uploads refuse, count as good).
    pub fn of(aqi: i64) -> Self {
        Self::ALL
            .into_iter()
            .rev()
            .find(|category| aqi >= category.lowest())
            .unwrap_or(Self::Good)
    }

    /// The lowest AQI of the band.
    pub fn lowest(self) -> i64 {
        match self {
            Self::Good => 0,
            Self::Moderate => 51,
            Self::UnhealthyForSensitiveGroups => 101,
            Self::Unhealthy => 151,
            Self::VeryUnhealthy => 201,
            Self::Hazardous => 301,
        }
    }

    /// The highest AQI of the band (`None` for the open-ended top band).
    pub fn highest(self) -> Option<i64> {
        Self::ALL
            .into_iter()
            .find(|category| category.lowest() > self.lowest())
            .map(|next| next.lowest() - 1)
    }

    /// The EPA's name of the band.
    pub fn name(self) -> &'static str {
        match self {
            Self::Good => "Good",
            Self::Moderate => "Moderate",
            Self::UnhealthyForSensitiveGroups => "Unhealthy for Sensitive Groups",
            Self::Unhealthy => "Unhealthy",
            Self::VeryUnhealthy => "Very Unhealthy",
            Self::Hazardous => "Hazardous",
        }
    }

    /// The EPA's colour of the band, as CSS `#rrggbb`.
    pub fn colour(self) -> &'static str {
        match self {
            Self::Good => "#00e400",
            Self::Moderate => "#ffff00",
            Self::UnhealthyForSensitiveGroups => "#ff7e00",
            Self::Unhealthy => "#ff0000",
            Self::VeryUnhealthy => "#8f3f97",
            Self::Hazardous => "#7e0023",
        }
    }

    /// A text colour readable on [`AqiCategory::colour`].
    pub fn text_colour(self) -> &'static str {
        match self {
            Self::Good | Self::Moderate | Self::UnhealthyForSensitiveGroups => "#111111",
            Self::Unhealthy | Self::VeryUnhealthy | Self::Hazardous => "#ffffff",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn band_edges_are_the_epas() {
        let band = |aqi| AqiCategory::of(aqi);
        assert_eq!(band(0), AqiCategory::Good);
        assert_eq!(band(50), AqiCategory::Good);
        assert_eq!(band(51), AqiCategory::Moderate);
        assert_eq!(band(100), AqiCategory::Moderate);
        assert_eq!(band(101), AqiCategory::UnhealthyForSensitiveGroups);
        assert_eq!(band(151), AqiCategory::Unhealthy);
        assert_eq!(band(201), AqiCategory::VeryUnhealthy);
        assert_eq!(band(300), AqiCategory::VeryUnhealthy);
        assert_eq!(band(301), AqiCategory::Hazardous);
        assert_eq!(band(10_000), AqiCategory::Hazardous);
        assert_eq!(band(-1), AqiCategory::Good);
    }

    #[test]
    fn bands_follow_each_other_without_gaps() {
        for pair in AqiCategory::ALL.windows(2) {
            assert_eq!(pair[0].highest(), Some(pair[1].lowest() - 1));
        }
        assert_eq!(AqiCategory::Hazardous.highest(), None);
    }
}
