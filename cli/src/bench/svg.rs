//! Horizontal bar charts as hand-written SVG: one chart per workload, one labelled bar per
//! column, 800 px wide.

use std::fmt::Write;

use super::measure::{Better, Row, number};

/// Width of every chart.
const WIDTH: f64 = 800.0;
/// Where bars start (the column labels sit left of it).
const BARS_LEFT: f64 = 150.0;
/// Room right of the longest bar for its value.
const VALUE_ROOM: f64 = 140.0;
/// Height of the title area.
const TOP: f64 = 64.0;
/// Height of one bar's slot.
const SLOT: f64 = 36.0;
/// Bar colours, one per column in order (colour-blind safe, Okabe-Ito).
const COLOURS: [&str; 6] = [
    "#0072B2", "#E69F00", "#009E73", "#CC79A7", "#56B4E9", "#D55E00",
];

/// The chart of `row` in `group`: one bar per cell, scaled to the largest value.
pub(crate) fn chart(group: &str, row: &Row) -> String {
    let height = TOP + SLOT * row.cells.len() as f64 + 16.0;
    let max = row
        .cells
        .iter()
        .map(|c| c.value)
        .fold(0.0f64, f64::max)
        .max(f64::MIN_POSITIVE);
    let min = row
        .cells
        .iter()
        .map(|c| c.value)
        .filter(|v| *v > 0.0)
        .fold(f64::INFINITY, f64::min);
    // Backends differ by orders of magnitude (memory against a server), where a linear
    // scale leaves every bar but one a sliver: past 30x, bars are drawn on a log scale.
    let log = min.is_finite() && max / min > 30.0;
    let floor = if log {
        (min.log10().floor() - 0.5).max(-12.0)
    } else {
        0.0
    };
    let scale = |v: f64| {
        if log {
            (v.max(f64::MIN_POSITIVE).log10() - floor) / (max.log10() - floor)
        } else {
            v / max
        }
    };
    let span = WIDTH - BARS_LEFT - VALUE_ROOM;
    let better = match (row.better, log) {
        (Better::Higher, false) => "higher is better",
        (Better::Lower, false) => "lower is better",
        (Better::Higher, true) => "higher is better; log scale",
        (Better::Lower, true) => "lower is better; log scale",
    };
    let mut out = String::new();
    // Writing into a String cannot fail, so the results of write! are ignored.
    let _ = writeln!(
        out,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{height}" viewBox="0 0 {WIDTH} {height}" font-family="sans-serif" font-size="14">"#
    );
    let _ = writeln!(
        out,
        r##"<rect width="100%" height="100%" fill="#ffffff"/>"##
    );
    let _ = writeln!(
        out,
        r##"<text x="16" y="26" font-size="17" font-weight="bold" fill="#222">{}</text>"##,
        escape(&format!("{group}: {}", row.workload))
    );
    let _ = writeln!(
        out,
        r##"<text x="16" y="48" fill="#555">{}</text>"##,
        escape(&format!("{}, {better}", row.unit))
    );
    for (i, cell) in row.cells.iter().enumerate() {
        let y = TOP + SLOT * i as f64;
        let width = (scale(cell.value) * span).max(1.0);
        let colour = COLOURS[i % COLOURS.len()];
        let _ = writeln!(
            out,
            r##"<text x="{}" y="{}" text-anchor="end" fill="#222">{}</text>"##,
            BARS_LEFT - 10.0,
            y + 19.0,
            escape(&cell.column)
        );
        let _ = writeln!(
            out,
            r#"<rect class="bar" x="{BARS_LEFT}" y="{}" width="{width:.1}" height="{}" fill="{colour}"><title>{}</title></rect>"#,
            y + 4.0,
            SLOT - 8.0,
            escape(&format!(
                "{}: {} {}",
                cell.column,
                number(cell.value),
                row.unit
            ))
        );
        let _ = writeln!(
            out,
            r##"<text x="{:.1}" y="{}" fill="#222">{}</text>"##,
            BARS_LEFT + width + 8.0,
            y + 19.0,
            escape(&format!("{} {}", number(cell.value), row.unit))
        );
    }
    out.push_str("</svg>\n");
    out
}

/// `text` with XML's special characters escaped.
fn escape(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bench::measure::Table;

    #[test]
    fn one_bar_per_column_scaled_to_the_largest() {
        let mut table = Table::new("store", "backend", String::new());
        table.rate("put <fast>", "items/s", "memory", vec![200.0]);
        table.rate("put <fast>", "items/s", "sqlite", vec![100.0]);
        let svg = chart("store", &table.rows[0]);
        assert!(svg.starts_with("<svg"));
        assert_eq!(svg.matches(r#"class="bar""#).count(), 2);
        assert!(svg.contains("put &lt;fast&gt;"));
        assert!(svg.contains(r#"width="510.0""#), "{svg}");
        assert!(svg.contains(r#"width="255.0""#), "{svg}");
        assert!(!svg.contains("log scale"));
    }

    #[test]
    fn values_orders_of_magnitude_apart_get_a_log_scale() {
        let mut table = Table::new("checkpoint", "backend", String::new());
        table.rate("put", "puts/s", "memory", vec![500_000.0]);
        table.rate("put", "puts/s", "postgres", vec![3_000.0]);
        let svg = chart("checkpoint", &table.rows[0]);
        assert!(svg.contains("higher is better; log scale"), "{svg}");
        // 3,000 is about half way up (in log terms) from the axis floor (10^3 / sqrt 10).
        let widths: Vec<f64> = svg
            .split(r#"class="bar""#)
            .skip(1)
            .filter_map(|s| s.split("width=\"").nth(1)?.split('"').next()?.parse().ok())
            .collect();
        assert_eq!(widths.len(), 2);
        assert_eq!(widths[0], 510.0);
        assert!(widths[1] > 80.0 && widths[1] < 200.0, "{widths:?}");
    }
}
