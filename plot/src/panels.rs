//! PNG plots for reports (plotters, bitmap backend, embedded DejaVu font: no system font or
//! fontconfig needed).

use std::path::Path;
use std::sync::Once;

use pbs::{Grid, Point};
use plotters::coord::ranged1d::{DefaultFormatting, KeyPointHint, ValueFormatter};
use plotters::coord::types::RangedCoordf64;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};
use plotters::style::FontStyle;

static FONT: Once = Once::new();

fn ensure_font() {
    FONT.call_once(|| {
        plotters::style::register_font("sans-serif", FontStyle::Normal, dejavu::sans::regular())
            .unwrap_or_else(|_| panic!("the embedded DejaVu font is valid"));
    });
}

/// One line of a chart.
#[derive(Debug, Clone)]
pub struct Series {
    /// legend text
    pub label: String,
    /// (x, y) points, in data units (log axes take care of themselves)
    pub points: Vec<(f64, f64)>,
    /// colour
    pub color: RGBColor,
    /// how the points are drawn
    pub stroke: Stroke,
}

/// How a [`Series`] is drawn.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stroke {
    /// a solid line through the points
    Solid,
    /// a dashed line through the points
    Dashed,
    /// a dot at each point, no line (a scatter)
    Points,
    /// a solid line through the points and a dot at each: for a few measured or modelled
    /// points, where a line alone reads as if every value between them were known
    LinePoints,
}

/// One chart of a figure.
#[derive(Debug, Clone)]
pub struct Panel {
    /// title above the chart
    pub title: String,
    /// x axis label
    pub x_label: String,
    /// y axis label
    pub y_label: String,
    /// logarithmic x axis (x must be > 0)
    pub log_x: bool,
    /// logarithmic y axis (y must be > 0)
    pub log_y: bool,
    /// the lines
    pub series: Vec<Series>,
}

/// Black, for dots drawn on a line of a [`PALETTE`] colour (one of its own colour hides in it).
pub const MARKER: RGBColor = RGBColor(0, 0, 0);

/// Colours that stay distinguishable: twelve, so that the eleven executors of a report each
/// have their own (with ten, the eleventh took the first's: pbs's).
pub const PALETTE: [RGBColor; 12] = [
    RGBColor(31, 119, 180),
    RGBColor(255, 127, 14),
    RGBColor(44, 160, 44),
    RGBColor(214, 39, 40),
    RGBColor(148, 103, 189),
    RGBColor(140, 86, 75),
    RGBColor(227, 119, 194),
    RGBColor(127, 127, 127),
    RGBColor(188, 189, 34),
    RGBColor(23, 190, 207),
    RGBColor(0, 0, 128),
    RGBColor(255, 215, 0),
];

/// The `i`-th series' colour: [`PALETTE`] in order, starting over after its last.
pub fn colour(i: usize) -> RGBColor {
    PALETTE[i % PALETTE.len()]
}

type PlotResult = Result<(), String>;

fn err<E: std::fmt::Display>(e: E) -> String {
    format!("plot: {e}")
}

/// The longest side of a picture, in pixels: beyond it the bitmap's byte count wraps in the
/// drawing crate (a panic at 100,000 × 100,000), and no viewer wants it.
pub const MAX_SIDE: u32 = 16384;

/// An error unless `width × height` pixels is a picture that can be drawn.
fn check_size(width: u32, height: u32) -> PlotResult {
    if width == 0 || height == 0 || width > MAX_SIDE || height > MAX_SIDE {
        return Err(format!("plot: a picture of {width}×{height} pixels; each side must be from 1 to {MAX_SIDE}"));
    }
    Ok(())
}

/// Draws `panels` in a grid of `cols` columns into a PNG of `width × height` pixels.
///
/// Points that are not finite, or not above 0 on a logarithmic axis, are left out; a panel
/// whose points span more than a quarter of the largest float is an error.
pub fn line_panels(path: &Path, width: u32, height: u32, cols: usize, panels: &[Panel]) -> PlotResult {
    ensure_font();
    check_size(width, height)?;
    draw_panels(BitMapBackend::new(path, (width, height)), cols, panels).map_err(|e| writing(path, e))
}

/// An error of a picture drawn into a file, with the file's name after it.
fn writing(path: &Path, e: String) -> String {
    format!("{e} (writing {})", path.display())
}

/// Like [`line_panels`], into an RGB buffer of `width × height × 3` bytes (for pictures that
/// compose charts with other drawings).
pub fn line_panels_rgb(rgb: &mut [u8], width: u32, height: u32, cols: usize, panels: &[Panel]) -> PlotResult {
    ensure_font();
    check_size(width, height)?;
    if rgb.len() != width as usize * height as usize * 3 {
        return Err(format!("plot: buffer of {} bytes for {width}×{height} RGB", rgb.len()));
    }
    draw_panels(BitMapBackend::with_buffer(rgb, (width, height)), cols, panels)
}

fn draw_panels(backend: BitMapBackend<'_>, cols: usize, panels: &[Panel]) -> PlotResult {
    let root = backend.into_drawing_area();
    root.fill(&WHITE).map_err(err)?;
    let rows = panels.len().div_ceil(cols.max(1));
    let areas = root.split_evenly((rows.max(1), cols.max(1)));
    for (panel, area) in panels.iter().zip(areas.iter()) {
        draw_panel(panel, area)?;
    }
    root.present().map_err(err)
}

/// The widest span of values a chart takes: a quarter of the largest float, so that its
/// padding and the drawing crate's own arithmetic stay finite (a range whose width overflows
/// hangs the crate's tick placement).
const MAX_SPAN: f64 = f64::MAX / 4.0;

/// The lowest and highest of `values` (`None`: no value), an error when the span between them
/// is over [`MAX_SPAN`].
fn extent(axis: &str, title: &str, values: impl Iterator<Item = f64>) -> Result<Option<(f64, f64)>, String> {
    let extent =
        values.fold(None, |b: Option<(f64, f64)>, v| Some(b.map_or((v, v), |(lo, hi)| (lo.min(v), hi.max(v)))));
    match extent {
        Some((lo, hi)) if hi - lo > MAX_SPAN => Err(format!(
            "plot: panel {title:?}: its {axis} values run from {lo:e} to {hi:e}, wider than a chart can scale ({MAX_SPAN:e})"
        )),
        _ => Ok(extent),
    }
}

/// A width of at least a billionth of the values' size, so that a range at 1e300 has one.
fn least_width(lo: f64, hi: f64) -> f64 {
    1e-9 * lo.abs().max(hi.abs())
}

/// The most distinct x values an axis takes its ticks from (thread counts, thread ids, grid
/// sizes); beyond, the drawing crate's own ticks (on a logarithmic axis they fall between round
/// numbers).
const MAX_DATA_TICKS: usize = 12;

type Area<'a> = DrawingArea<BitMapBackend<'a>, plotters::coord::Shift>;

fn draw_panel(p: &Panel, area: &Area<'_>) -> PlotResult {
    if p.series.iter().all(|s| s.points.is_empty()) {
        // Nothing to draw: the title alone says so, without axes that would mean nothing.
        let style = ("sans-serif", 18).into_font().color(&BLACK).pos(Pos::new(HPos::Center, VPos::Center));
        let (w, h) = area.dim_in_pixel();
        return area.draw_text(&p.title, &style, (w as i32 / 2, h as i32 / 2)).map_err(err);
    }
    // Values that a point on the chart cannot show (NaN, ±∞, ≤ 0 on a log axis) map to
    // non-finite coordinates and are left out.
    let tx = |v: f64| if p.log_x { v.log10() } else { v };
    let ty = |v: f64| if p.log_y { v.log10() } else { v };
    let shown = |s: &Series| -> Vec<(f64, f64)> {
        s.points.iter().map(|&(x, y)| (tx(x), ty(y))).filter(|&(x, y)| x.is_finite() && y.is_finite()).collect()
    };
    let pts: Vec<(f64, f64)> = p.series.iter().flat_map(shown).collect();
    let ChartRanges { x: (x0, x1), y: (y0, mut y1), ticks_at_data: at_data } = chart_ranges(&p.title, &pts)?;
    let plot_px = f64::from(area.dim_in_pixel().1) - PANEL_FRAME_PX;
    let corner;
    (corner, y1) = legend_place(&pts, &along_lines(p, &shown), (x0, x1), (y0, y1), p.series.len(), plot_px);
    let mut builder = ChartBuilder::on(area);
    builder.caption(&p.title, ("sans-serif", 18)).margin(8).x_label_area_size(36).y_label_area_size(56);
    if let Some(ticks) = at_data {
        let x = DataTicks { inner: (x0..x1).into(), ticks };
        let chart = builder.build_cartesian_2d(x, y0..y1).map_err(err)?;
        draw_chart(p, chart, corner, true, &shown)
    } else {
        let chart = builder.build_cartesian_2d(x0..x1, y0..y1).map_err(err)?;
        draw_chart(p, chart, corner, false, &shown)
    }
}

/// What a chart over some points shows: its axes' ranges, and the x ticks where they stand
/// at the data's values.
#[derive(Debug, PartialEq)]
struct ChartRanges {
    x: (f64, f64),
    y: (f64, f64),
    ticks_at_data: Option<Vec<f64>>,
}

/// The ranges of a chart over `pts` (finite, as drawn; none: 0 to 1 on both axes): x from the
/// lowest value to the highest, a range of no width widened; y the same but widened about its
/// value, then padded by 5 % each way; over a few x values, ticks at them and a 4 % margin each
/// way.
fn chart_ranges(title: &str, pts: &[(f64, f64)]) -> Result<ChartRanges, String> {
    let (mut x0, mut x1) = extent("x", title, pts.iter().map(|q| q.0))?.unwrap_or((0.0, 1.0));
    let (y0, y1) = extent("y", title, pts.iter().map(|q| q.1))?.unwrap_or((0.0, 1.0));
    // A range of no width draws nothing: widened to the right, or to the left at the top of
    // the floats.
    if x1 - x0 < 1e-12_f64.max(least_width(x0, x1)) {
        let width = 1f64.max(least_width(x0, x1));
        (x0, x1) = if (x0 + width).is_finite() { (x0, x0 + width) } else { (x0 - width, x0) };
    }
    // A flat series (no migrations once converged) is drawn across the middle of a range one
    // wide (or a billionth of its value), not of ±1e-9, whose ticks read 0, 0, 0, …, -1e-9.
    let (y0, y1) = if y1 - y0 < 1e-12_f64.max(least_width(y0, y1)) {
        let half = 0.5 * 1f64.max(least_width(y0, y1));
        ((y0 - half).max(f64::MIN), (y1 + half).min(f64::MAX))
    } else {
        (y0, y1)
    };
    let pad = (y1 - y0) * 0.05;
    let y = ((y0 - pad).max(f64::MIN), (y1 + pad).min(f64::MAX));
    // On an x axis over a few values (the thread counts of a scaling run, thread ids), the ticks
    // stand at those values, with a margin so that dots at the first and last are drawn whole.
    let ticks_at_data = ticks_at(pts, (x0, x1));
    if ticks_at_data.is_some() {
        let margin = 0.04 * (x1 - x0);
        (x0, x1) = (x0 - margin, x1 + margin);
    }
    Ok(ChartRanges { x: (x0, x1), y, ticks_at_data })
}

/// The distinct x values of `pts` (within a billionth of `x0..x1`'s width), if there are from
/// 2 to [`MAX_DATA_TICKS`] of them: the ticks of an axis over a few values.
fn ticks_at(pts: &[(f64, f64)], (x0, x1): (f64, f64)) -> Option<Vec<f64>> {
    let mut xs: Vec<f64> = pts.iter().map(|q| q.0).collect();
    xs.sort_by(f64::total_cmp);
    xs.dedup_by(|a, b| (*a - *b).abs() <= 1e-9 * (x1 - x0));
    (2..=MAX_DATA_TICKS).contains(&xs.len()).then_some(xs)
}

/// Where the legend of `entries` lines goes on a chart of `x0..x1` × `y0..y1` whose plotting
/// area is `plot_px` pixels high, over the series' `points` and the `lines` between them (as
/// points along them), and the chart's new top: the corner where the least is drawn; where that
/// corner still holds data points, the upper right with the y axis grown upwards by the
/// legend's height (a legend over a line between points hides less), unless the legend would
/// take most of the chart.
fn legend_place(
    points: &[(f64, f64)],
    lines: &[(f64, f64)],
    (x0, x1): (f64, f64),
    (y0, y1): (f64, f64),
    entries: usize,
    plot_px: f64,
) -> (SeriesLabelPosition, f64) {
    let (at_points, at_lines) = (quarter_counts(points, (x0, x1), (y0, y1)), quarter_counts(lines, (x0, x1), (y0, y1)));
    let i = emptiest([0, 1, 2, 3].map(|q| at_points[q] + at_lines[q]));
    let legend_px = 16.0 * entries as f64 + 12.0;
    if at_points[i] > 0 && legend_px < 0.45 * plot_px {
        let top = (y1 + (y1 - y0) * legend_px / (plot_px - legend_px)).min(f64::MAX);
        (SeriesLabelPosition::UpperRight, top)
    } else {
        (corner(i), y1)
    }
}

/// Where the lines of `p`'s series draw between their points, as seven points between two,
/// so that a legend is not set down across a line.
fn along_lines(p: &Panel, shown: &dyn Fn(&Series) -> Vec<(f64, f64)>) -> Vec<(f64, f64)> {
    let mut out = Vec::new();
    for s in &p.series {
        let pts = shown(s);
        if s.stroke != Stroke::Points {
            for w in pts.windows(2) {
                let ((xa, ya), (xb, yb)) = (w[0], w[1]);
                out.extend((1..8).map(|i| {
                    let f = f64::from(i) / 8.0;
                    (xa + f * (xb - xa), ya + f * (yb - ya))
                }));
            }
        }
    }
    out
}

/// The pixels of a panel's height that are not its plotting area: the title, the margins and
/// the x axis's labels.
const PANEL_FRAME_PX: f64 = 26.0 + 16.0 + 36.0;

/// An `f64` axis whose ticks and grid lines stand at given values (the drawing crate's
/// `WithKeyPoints` takes no label formatter).
struct DataTicks {
    inner: RangedCoordf64,
    ticks: Vec<f64>,
}

impl Ranged for DataTicks {
    type FormatOption = DefaultFormatting;
    type ValueType = f64;

    fn map(&self, value: &f64, limit: (i32, i32)) -> i32 {
        self.inner.map(value, limit)
    }

    fn key_points<Hint: KeyPointHint>(&self, hint: Hint) -> Vec<f64> {
        // The bold lines and labels only: light lines between them would not fall on values.
        if hint.weight().allow_light_points() {
            Vec::new()
        } else {
            self.ticks.clone()
        }
    }

    fn range(&self) -> std::ops::Range<f64> {
        self.inner.range()
    }
}

/// The mesh, the series and the legend (in `corner`) of `p` on `chart` (`ticks_at_data`: the
/// x ticks stand at the data's values, which their labels give whole; `shown`: a series' points
/// as drawn).
fn draw_chart<'a, X>(
    p: &Panel,
    mut chart: ChartContext<'a, BitMapBackend<'a>, Cartesian2d<X, RangedCoordf64>>,
    corner: SeriesLabelPosition,
    ticks_at_data: bool,
    shown: &dyn Fn(&Series) -> Vec<(f64, f64)>,
) -> PlotResult
where
    X: Ranged<ValueType = f64> + ValueFormatter<f64>,
{
    let fmt_x = |v: &f64| match (p.log_x, ticks_at_data) {
        (true, true) => format_data_tick(10f64.powf(*v)),
        (true, false) => format_log_tick(10f64.powf(*v)),
        (false, true) => format_data_tick(*v),
        (false, false) => format_tick(*v),
    };
    let fmt_y = |v: &f64| if p.log_y { format_log_tick(10f64.powf(*v)) } else { format_tick(*v) };
    chart
        .configure_mesh()
        .x_desc(&p.x_label)
        .y_desc(&p.y_label)
        .x_label_formatter(&fmt_x)
        .y_label_formatter(&fmt_y)
        .label_style(("sans-serif", 12))
        .draw()
        .map_err(err)?;
    for s in &p.series {
        let data = shown(s);
        let color = s.color;
        let style = color.stroke_width(2);
        // Each legend entry drawn as its series is.
        match s.stroke {
            Stroke::Solid => chart
                .draw_series(LineSeries::new(data, style))
                .map_err(err)?
                .label(&s.label)
                .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 18, y)], color.stroke_width(2))),
            Stroke::Dashed => chart
                .draw_series(DashedLineSeries::new(data, 6, 4, style))
                .map_err(err)?
                .label(&s.label)
                .legend(move |(x, y)| {
                    plotters::element::DashedPathElement::new(vec![(x, y), (x + 18, y)], 5, 3, color.stroke_width(2))
                }),
            Stroke::Points => chart
                .draw_series(data.into_iter().map(|p| Circle::new(p, 3, color.filled())))
                .map_err(err)?
                .label(&s.label)
                .legend(move |(x, y)| Circle::new((x + 9, y), 3, color.filled())),
            Stroke::LinePoints => {
                chart.draw_series(data.iter().map(|&p| Circle::new(p, 4, color.filled()))).map_err(err)?;
                chart.draw_series(LineSeries::new(data, style)).map_err(err)?.label(&s.label).legend(move |(x, y)| {
                    EmptyElement::at((x + 9, y))
                        + PathElement::new(vec![(-9, 0), (9, 0)], color.stroke_width(2))
                        + Circle::new((0, 0), 4, color.filled())
                })
            }
        };
    }
    chart
        .configure_series_labels()
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .label_font(("sans-serif", 12))
        .position(corner)
        .draw()
        .map_err(err)
}

/// Points in each quarter of the chart, in the order upper right, upper left, lower right,
/// lower left (the order of [`corner`]).
fn quarter_counts(pts: &[(f64, f64)], (x0, x1): (f64, f64), (y0, y1): (f64, f64)) -> [usize; 4] {
    let (xm, ym) = ((x0 + x1) / 2.0, (y0 + y1) / 2.0);
    let mut counts = [0; 4];
    for &(x, y) in pts {
        counts[usize::from(x <= xm) + 2 * usize::from(y <= ym)] += 1;
    }
    counts
}

/// The corner of quarter `i` of [`quarter_counts`].
fn corner(i: usize) -> SeriesLabelPosition {
    match i {
        0 => SeriesLabelPosition::UpperRight,
        1 => SeriesLabelPosition::UpperLeft,
        2 => SeriesLabelPosition::LowerRight,
        _ => SeriesLabelPosition::LowerLeft,
    }
}

/// The quarter of `counts` with the fewest points, upper right first on a tie.
fn emptiest(counts: [usize; 4]) -> usize {
    (0..4).min_by_key(|&i| counts[i]).unwrap_or(0)
}

/// A tick of a logarithmic axis, to two significant digits: its ticks fall between round
/// numbers (15.85 threads reads as 16).
fn format_log_tick(v: f64) -> String {
    if !(1e-2..1e5).contains(&v) {
        return format_tick(v);
    }
    let digits = v.log10().floor() as i32;
    let rounded = (v / 10f64.powi(digits - 1)).round() * 10f64.powi(digits - 1);
    if digits >= 1 {
        format!("{rounded:.0}")
    } else {
        format!("{rounded:.*}", (1 - digits) as usize)
    }
}

/// A tick at a data value (a thread count, a grid size; on a logarithmic axis, back from its
/// logarithm): a whole number where it rounds to one, else as [`format_tick`] gives it.
fn format_data_tick(v: f64) -> String {
    let whole = v.round();
    if (v - whole).abs() <= 1e-9 * v.abs() && whole.abs() < 1e15 {
        format!("{whole:.0}")
    } else {
        format_tick(v)
    }
}

fn format_tick(v: f64) -> String {
    let a = v.abs();
    if a < 1e-9 {
        "0".into() // rounding noise of a tick placed at zero
    } else if a != 0.0 && !(1e-2..1e5).contains(&a) {
        format!("{v:.0e}")
    } else if a >= 100.0 || v.fract() == 0.0 {
        format!("{v:.0}")
    } else {
        format!("{v:.2}")
    }
}

/// One owner map: boxes coloured by owner, darker where the load is higher, vCores as dots.
#[derive(Debug, Clone)]
pub struct OwnerMap<'a> {
    /// title above the map
    pub title: String,
    /// the grid (2D, or 3D drawn as layers: [`layers_shown`])
    pub grid: Grid,
    /// one load per box
    pub loads: &'a [f64],
    /// one owner per box
    pub owners: &'a [u32],
    /// vCore positions, in box units (in 3D, each on the layer that holds it)
    pub positions: &'a [Point],
}

/// Most layers an owner map of a 3D grid shows: a 4 × 4 block of small maps.
pub const MAX_LAYERS: usize = 16;

/// The layers (z indices) an owner map shows: every layer of a grid up to [`MAX_LAYERS`]
/// deep, else that many spread evenly from the first to the last.
pub fn layers_shown(nz: usize) -> Vec<usize> {
    if nz <= MAX_LAYERS {
        return (0..nz).collect();
    }
    (0..MAX_LAYERS).map(|l| (l * (nz - 1) + (MAX_LAYERS - 1) / 2) / (MAX_LAYERS - 1)).collect()
}

/// Columns and rows of the block of layers in a panel: as square as the count allows.
pub fn layer_block(layers: usize) -> (usize, usize) {
    let cols = (1..=layers).find(|c| c * c >= layers).unwrap_or(1);
    (cols, layers.div_ceil(cols))
}

/// An owner's colour (see [`crate::colour::owner_colour`]), darker where the load is higher.
fn shaded_owner_colour(owner: u32, shade: f64) -> RGBColor {
    let k = 1.0 - 0.5 * shade.clamp(0.0, 1.0);
    let [r, g, b] = crate::colour::owner_colour(owner).map(|v| (f64::from(v) * k) as u8);
    RGBColor(r, g, b)
}

/// Pixels of a 3D panel's caption above each layer ("z = 3").
const LAYER_CAPTION_PX: f64 = 16.0;

/// Draws owner maps in a grid of `cols` columns, each panel `panel_px` pixels wide (and as
/// high as the first map's grid is, in proportion, with its title). A 3D grid is drawn as the
/// block of its layers that [`layers_shown`] picks, each captioned with its z, shaded against
/// the whole grid's highest load. An error names a map with fewer loads or owners than its
/// grid has boxes, or a picture beyond [`MAX_SIDE`] pixels a side.
pub fn owner_maps(path: &Path, cols: usize, panel_px: u32, maps: &[OwnerMap<'_>]) -> PlotResult {
    ensure_font();
    if cols == 0 || maps.is_empty() {
        return Err(format!("plot: {} owner maps in {cols} columns", maps.len()));
    }
    if let Some(m) = maps.iter().find(|m| m.loads.len() < m.grid.len() || m.owners.len() < m.grid.len()) {
        return Err(format!(
            "plot: owner map {:?}: {} loads and {} owners for {} boxes",
            m.title,
            m.loads.len(),
            m.owners.len(),
            m.grid.len()
        ));
    }
    let rows = maps.len().div_ceil(cols);
    let first = maps[0].grid;
    let (block_cols, block_rows) = layer_block(layers_shown(first.nz()).len());
    let layer_h = f64::from(panel_px) / block_cols as f64 * first.ny() as f64 / first.nx() as f64
        + if first.nz() > 1 { LAYER_CAPTION_PX } else { 0.0 };
    let panel_h = (layer_h * block_rows as f64 + 30.0).min(f64::from(u32::MAX)) as u32;
    let side = |n: usize, px: u32| u32::try_from(n).ok().and_then(|n| n.checked_mul(px)).unwrap_or(u32::MAX);
    let (width, height) = (side(cols, panel_px), side(rows, panel_h));
    check_size(width, height)?;
    let root = BitMapBackend::new(path, (width, height)).into_drawing_area();
    root.fill(&WHITE).map_err(err)?;
    for (m, area) in maps.iter().zip(root.split_evenly((rows, cols)).iter()) {
        let max = m.loads.iter().copied().fold(0.0, f64::max).max(f64::MIN_POSITIVE);
        let (nx, ny, nz) = (m.grid.nx(), m.grid.ny(), m.grid.nz());
        let layers = layers_shown(nz);
        let (block_cols, block_rows) = layer_block(layers.len());
        let inner = area.titled(&m.title, ("sans-serif", 14)).map_err(err)?;
        for (&z, cell) in layers.iter().zip(inner.split_evenly((block_rows, block_cols)).iter()) {
            let mut chart = ChartBuilder::on(cell);
            chart.margin(3);
            let caption = format!("z = {z}");
            if nz > 1 {
                chart.caption(&caption, ("sans-serif", 11));
            }
            let mut chart = chart.build_cartesian_2d(0.0..nx as f64, 0.0..ny as f64).map_err(err)?;
            let boxes = (0..nx * ny).map(|k| {
                let b = k + z * nx * ny;
                let (i, j) = (k % nx, k / nx);
                let c = shaded_owner_colour(m.owners[b], m.loads[b] / max);
                Rectangle::new([(i as f64, j as f64), (i as f64 + 1.0, j as f64 + 1.0)], c.filled())
            });
            chart.draw_series(boxes).map_err(err)?;
            let on_layer = m.positions.iter().filter(|p| nz == 1 || p[2].floor() as i64 == z as i64);
            chart.draw_series(on_layer.map(|p| Circle::new((p[0], p[1]), 3, BLACK.filled()))).map_err(err)?;
        }
    }
    root.present().map_err(|e| writing(path, err(e)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn series_colours_run_through_the_palette_and_start_over() {
        let first: Vec<RGBColor> = (0..PALETTE.len()).map(colour).collect();
        assert_eq!(first, PALETTE);
        assert_eq!((colour(PALETTE.len()), colour(PALETTE.len() + 5)), (PALETTE[0], PALETTE[5]));
    }

    #[test]
    fn writes_pngs_of_the_requested_size() {
        let dir = std::env::temp_dir().join(format!("pbs-plot-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let p = dir.join("lines.png");
        let panel = Panel {
            title: "t".into(),
            x_label: "x".into(),
            y_label: "y".into(),
            log_x: true,
            log_y: false,
            series: vec![Series {
                label: "a".into(),
                points: vec![(1.0, 0.5), (10.0, 0.1), (100.0, 0.0)],
                color: PALETTE[0],
                stroke: Stroke::Dashed,
            }],
        };
        line_panels(&p, 400, 300, 1, &[panel]).unwrap();
        // The legend goes where the points are fewest.
        let emptiest_corner = |pts: &[(f64, f64)], xr, yr| {
            let counts = quarter_counts(pts, xr, yr);
            (corner(emptiest(counts)), counts[emptiest(counts)])
        };
        let pts = [(0.1, 0.9), (0.9, 0.9), (0.9, 0.1)];
        assert!(matches!(emptiest_corner(&pts, (0.0, 1.0), (0.0, 1.0)), (SeriesLabelPosition::LowerLeft, 0)));
        assert!(matches!(emptiest_corner(&[], (0.0, 1.0), (0.0, 1.0)), (SeriesLabelPosition::UpperRight, 0)));
        let everywhere = [(0.1, 0.9), (0.9, 0.9), (0.9, 0.1), (0.1, 0.1), (0.2, 0.2)];
        assert!(matches!(emptiest_corner(&everywhere, (0.0, 1.0), (0.0, 1.0)), (SeriesLabelPosition::UpperRight, 1)));
        let bytes = std::fs::read(&p).unwrap();
        assert_eq!(&bytes[1..4], b"PNG");
        // IHDR: width and height, big-endian, at bytes 16..24
        assert_eq!(u32::from_be_bytes(bytes[16..20].try_into().unwrap()), 400);
        assert_eq!(u32::from_be_bytes(bytes[20..24].try_into().unwrap()), 300);
        let g = Grid::new(4, 2).unwrap();
        let m = OwnerMap {
            title: "m".into(),
            grid: g,
            loads: &[1.0; 8],
            owners: &[0, 0, 1, 1, 0, 0, 1, 1],
            positions: &[[1.0, 1.0, 0.5], [3.0, 1.0, 0.5]],
        };
        owner_maps(&dir.join("map.png"), 1, 200, &[m]).unwrap();
        assert!(std::fs::metadata(dir.join("map.png")).unwrap().len() > 100);
        std::fs::remove_dir_all(&dir).ok();
    }

    #[test]
    fn a_panel_with_nothing_to_draw_shows_its_title_alone() {
        let (w, h) = (400u32, 300u32);
        let mut rgb = vec![0u8; (w * h * 3) as usize];
        let empty = Panel {
            title: "1 NUMA node: no remote box runs".into(),
            x_label: "threads".into(),
            y_label: "%".into(),
            log_x: false,
            log_y: false,
            series: Vec::new(),
        };
        line_panels_rgb(&mut rgb, w, h, 1, &[empty]).unwrap();
        let row_inked = |y: u32| (0..w).any(|x| rgb[((y * w + x) * 3) as usize..][..3] != [255, 255, 255]);
        // The title in the middle; no caption at the top, no axes at the left or bottom.
        assert!((h / 2 - 10..h / 2 + 10).any(row_inked), "the title is drawn");
        assert!(!(0..h / 3).any(row_inked) && !(2 * h / 3..h).any(row_inked), "nothing but the title");
        // Centred across the panel too: its inked columns as far from the left as the right.
        let column_inked = |x: u32| (0..h).any(|y| rgb[((y * w + x) * 3) as usize..][..3] != [255, 255, 255]);
        let (left, right) =
            ((0..w).find(|&x| column_inked(x)).unwrap(), (0..w).rev().find(|&x| column_inked(x)).unwrap());
        assert!(
            left > 20 && (i64::from(left) - i64::from(w - 1 - right)).abs() <= 3,
            "the title from {left} to {right}"
        );
    }

    /// The room made above lines that cross every corner is as high as the legend drawn
    /// there: on 300 pixels (222 of them plotting area), the legend's box ends above the upper
    /// line, whose pixels all lie below it.
    #[test]
    fn the_legend_drawn_above_the_lines_clears_them() {
        let (w, h) = (400u32, 300u32);
        let mut rgb = vec![0u8; (w * h * 3) as usize];
        let lines = [(0.1, 0), (0.9, 1)].map(|(y, c)| Series {
            label: "a".into(),
            points: vec![(0.0, y), (1.0, y)],
            color: PALETTE[c],
            stroke: Stroke::Solid,
        });
        line_panels_rgb(&mut rgb, w, h, 1, &[of_series(lines.to_vec())]).unwrap();
        let px = |x: u32, y: u32| -> [u8; 3] { rgb[((y * w + x) * 3) as usize..][..3].try_into().unwrap() };
        let upper = [PALETTE[1].0, PALETTE[1].1, PALETTE[1].2];
        // The upper line: rows where its colour runs over half the width (the legend's own
        // sample of it is 18 pixels long).
        let line_top = (0..h).find(|&y| (0..w).filter(|&x| px(x, y) == upper).count() > w as usize / 2).unwrap();
        // The legend's box: its top and bottom borders, black runs of 40 pixels and more in the
        // upper half (the x axis is at the bottom).
        let borders: Vec<u32> =
            (0..h / 2).filter(|&y| (0..w).filter(|&x| px(x, y) == [0, 0, 0]).count() >= 40).collect();
        assert_eq!(borders.len(), 2, "the legend's top and bottom borders: {borders:?}");
        assert!(borders[1] - borders[0] >= 44 - 1, "a legend of two entries is 44 pixels high: {borders:?}");
        assert!(line_top > borders[1], "the upper line at row {line_top}, the legend down to row {}", borders[1]);
    }

    /// Each legend entry is drawn as its series is, in one 18-pixel column: a solid and a
    /// dashed line across it, a dot at its middle, a line with a dot at its middle.
    #[test]
    fn legend_entries_share_one_column_marked_as_their_series() {
        let (w, h) = (400u32, 300u32);
        let mut rgb = vec![0u8; (w * h * 3) as usize];
        let strokes = [Stroke::Solid, Stroke::Dashed, Stroke::Points, Stroke::LinePoints];
        // Lines from the bottom's middle to the upper right leave the upper left to the legend.
        let series = (0..4)
            .map(|i| Series {
                label: format!("s{i}"),
                points: vec![(0.5, 0.0), (1.0, 1.0 - 0.1 * i as f64)],
                color: PALETTE[i],
                stroke: strokes[i],
            })
            .collect();
        line_panels_rgb(&mut rgb, w, h, 1, &[of_series(series)]).unwrap();
        let px = |x: u32, y: u32| -> [u8; 3] { rgb[((y * w + x) * 3) as usize..][..3].try_into().unwrap() };
        // Each entry's pixels in the upper left quarter, right of the y axis.
        let span = |i: usize| {
            let c = [PALETTE[i].0, PALETTE[i].1, PALETTE[i].2];
            let at: Vec<(u32, u32)> =
                (0..h / 2).flat_map(|y| (66..w / 2).map(move |x| (x, y))).filter(|&(x, y)| px(x, y) == c).collect();
            let (xs, ys) = (at.iter().map(|q| q.0), at.iter().map(|q| q.1));
            ((xs.clone().min().unwrap(), xs.max().unwrap()), (ys.clone().min().unwrap(), ys.max().unwrap()))
        };
        let (solid, dashed, dot, line_dot) = (span(0), span(1), span(2), span(3));
        let x0 = solid.0 .0;
        assert_eq!(solid.0, (x0, x0 + 17), "the solid line's sample");
        assert_eq!(dashed.0 .0, x0, "the dashed line's sample starts where the solid one does");
        assert!((x0 + 16..=x0 + 18).contains(&dashed.0 .1), "and ends near its end: {dashed:?}");
        assert_eq!(dot.0, (x0 + 6, x0 + 12), "a dot of radius 3 at the middle");
        assert_eq!(line_dot.0, (x0, x0 + 17), "a line across, its dot within it");
        assert!(line_dot.1 .1 - line_dot.1 .0 >= 8, "the dot of radius 4 on the line: {line_dot:?}");
        assert!(solid.1 .1 < dashed.1 .0 && dashed.1 .1 < dot.1 .0 && dot.1 .1 < line_dot.1 .0, "entries in order");
    }

    #[test]
    fn a_log_axis_over_a_few_values_ticks_at_them() {
        let pts: Vec<(f64, f64)> = [16.0f64, 64.0, 256.0, 64.0].iter().map(|t| (t.log10(), 1.0)).collect();
        let ticks = ticks_at(&pts, (16f64.log10(), 256f64.log10())).unwrap();
        assert_eq!(ticks.len(), 3);
        let many: Vec<(f64, f64)> = (1..=13).map(|s| (f64::from(s).log10(), 1.0)).collect();
        assert_eq!(ticks_at(&many, (0.0, 13f64.log10())), None, "past twelve values, the crate's own ticks");
        assert_eq!(ticks_at(&pts[..1], (0.0, 1.0)), None, "one value is no axis");
        // Values within a billionth of the axis's width are one tick.
        let near = [(-100.0, 0.0), (100.0, 0.0), (100.0 + 1e-7, 0.0), (100.0 + 1e-6, 0.0)];
        assert_eq!(ticks_at(&near, (-100.0, 100.0)), Some(vec![-100.0, 100.0, 100.0 + 1e-6]));
    }

    #[test]
    fn a_legend_over_lines_everywhere_gets_room_above_them() {
        // Two lines across the whole width, one high and one low: every corner has some.
        let panel = of_series(
            [0.1, 0.9]
                .iter()
                .map(|&y| Series {
                    label: "a".into(),
                    points: vec![(0.0, y), (1.0, y)],
                    color: PALETTE[0],
                    stroke: Stroke::LinePoints,
                })
                .collect(),
        );
        let points: Vec<(f64, f64)> = panel.series.iter().flat_map(|s| s.points.clone()).collect();
        let lines = along_lines(&panel, &|s: &Series| s.points.clone());
        assert_eq!(lines.len(), 2 * 7, "seven points along each line");
        let (corner, top) = legend_place(&points, &lines, (0.0, 1.0), (0.0, 1.0), 2, 300.0);
        assert!(matches!(corner, SeriesLabelPosition::UpperRight));
        // 44 px of legend over 256 px of data: the axis grows by 44 / 256 of its height.
        assert!((top - (1.0 + 44.0 / 256.0)).abs() < 1e-12, "{top}");
        // A legend that would take most of the chart goes in the emptiest corner instead.
        let (_, top) = legend_place(&points, &lines, (0.0, 1.0), (0.0, 1.0), 20, 300.0);
        assert_eq!(top, 1.0);
        // Lines in the upper half only leave the lower corners free: no room is made.
        let (upper_points, upper_lines) = (&points[2..], &lines[7..]);
        let (corner, top) = legend_place(upper_points, upper_lines, (0.0, 1.0), (0.0, 1.0), 2, 300.0);
        assert!(matches!(corner, SeriesLabelPosition::LowerRight) && top == 1.0);
        // A corner crossed by a line but holding no point takes the legend as it is: a
        // diagonal from the lower left to the upper right, points at its ends only.
        let diagonal = [(0.0, 0.0), (1.0, 1.0)];
        let samples: Vec<(f64, f64)> = (1..8).map(|i| (f64::from(i) / 8.0, f64::from(i) / 8.0)).collect();
        let (corner, top) = legend_place(&diagonal, &samples, (0.0, 1.0), (0.0, 1.0), 2, 300.0);
        assert!(matches!(corner, SeriesLabelPosition::UpperLeft) && top == 1.0);
        // The room made is in proportion to the axis's own height, wherever it starts.
        let lift = |q: &[(f64, f64)]| q.iter().map(|&(x, y)| (x, 1.0 + 2.0 * y)).collect::<Vec<_>>();
        let (_, top) = legend_place(&lift(&points), &lift(&lines), (0.0, 1.0), (1.0, 3.0), 2, 300.0);
        assert!((top - (3.0 + 2.0 * 44.0 / 256.0)).abs() < 1e-12, "{top}");
        // A legend of exactly 0.45 of the plotting height, or of ten lines on 300 pixels, is
        // too tall to make room for.
        assert_eq!(legend_place(&points, &lines, (0.0, 1.0), (0.0, 1.0), 6, 240.0).1, 1.0);
        assert_eq!(legend_place(&points, &lines, (0.0, 1.0), (0.0, 1.0), 10, 300.0).1, 1.0);
        // The emptiest corner counts points and line samples together: the upper right holds
        // five samples and no point, the upper left one of each, the lower corners two of each.
        let pts = [(0.25, 0.75), (0.75, 0.25), (0.7, 0.2), (0.25, 0.25), (0.2, 0.2)];
        let mut samples = vec![(0.75, 0.75); 5];
        samples.extend([(0.3, 0.7), (0.7, 0.3), (0.8, 0.3), (0.3, 0.3), (0.3, 0.2)]);
        let (corner, top) = legend_place(&pts, &samples, (0.0, 1.0), (0.0, 1.0), 2, 300.0);
        assert!(matches!(corner, SeriesLabelPosition::UpperRight) && top > 1.0, "the upper left, which holds a point");
    }

    #[test]
    fn ticks_at_data_read_as_the_values_themselves() {
        let ticks: Vec<String> =
            [22500f64, 16.0, 64.0, 2500.0].map(|v| format_data_tick(10f64.powf(v.log10()))).to_vec();
        assert_eq!(ticks, ["22500", "16", "64", "2500"]);
        assert_eq!(format_data_tick(0.25), "0.25");
    }

    #[test]
    fn log_ticks_read_as_two_significant_digits() {
        let ticks: Vec<String> = [15.848, 6.3096, 251.19, 1.0, 0.15849, 0.031623, 2e5].map(format_log_tick).to_vec();
        assert_eq!(ticks, ["16", "6.3", "250", "1.0", "0.16", "0.032", "2e5"]);
    }

    /// A chart's extent is its lowest and highest value; a span of exactly `MAX_SPAN` is
    /// taken, the next float past it refused; the least width is a billionth of the larger
    /// magnitude.
    #[test]
    fn extents_run_from_the_lowest_to_the_highest_value_up_to_the_widest_span() {
        assert_eq!(extent("x", "t", [3.0, -1.0, 2.0].into_iter()), Ok(Some((-1.0, 3.0))));
        assert_eq!(extent("x", "t", std::iter::empty()), Ok(None));
        assert_eq!(extent("y", "t", [0.0, MAX_SPAN].into_iter()), Ok(Some((0.0, MAX_SPAN))));
        let past = f64::from_bits(MAX_SPAN.to_bits() + 1);
        let e = extent("y", "t", [0.0, past].into_iter()).unwrap_err();
        assert!(e.starts_with("plot: panel \"t\": its y values run from 0e0 to "), "{e}");
        assert_eq!(least_width(-3e300, 2e300), 3e291);
        assert_eq!(least_width(2.0, -4.0), 4e-9);
        assert_eq!(least_width(0.0, 0.0), 0.0);
    }

    /// Ticks read as a person writes them: zero for rounding noise, two decimals below 100,
    /// whole numbers from 100 and for whole values, a power of ten outside 0.01–100,000.
    /// The ranges a chart shows: x from the lowest value to the highest, no width widened
    /// (by 1, by a billionth at 1e300, leftwards at the top of the floats); y the same about
    /// its value where all are equal (clamped to the floats), then padded by 5 %; over 2 to 12
    /// distinct x values, ticks at them and a 4 % margin each way.
    #[test]
    fn charts_range_over_their_points_widened_padded_and_with_margins() {
        let ranges = |pts: &[(f64, f64)]| chart_ranges("t", pts).unwrap();
        let close = |a: (f64, f64), b: (f64, f64)| {
            let tol = 1e-12 * a.0.abs().max(a.1.abs()).max(1.0);
            (a.0 - b.0).abs() <= tol && (a.1 - b.1).abs() <= tol
        };
        assert_eq!(ranges(&[]), ChartRanges { x: (0.0, 1.0), y: (-0.05, 1.05), ticks_at_data: None });
        let one = ranges(&[(5.0, 3.0)]);
        assert_eq!((one.x, one.ticks_at_data), ((5.0, 6.0), None));
        assert!(close(one.y, (2.45, 3.55)), "{:?}", one.y);
        assert!(close(ranges(&[(0.0, 0.0), (1.0, 0.0)]).y, (-0.55, 0.55)), "a flat series about its value");
        assert_eq!(ranges(&[(1e300, 1.0)]).x, (1e300, 1e300 + 1e291));
        let top = ranges(&[(f64::MAX, f64::MAX)]);
        assert_eq!(top.x, (f64::MAX - 1e-9 * f64::MAX, f64::MAX));
        assert!(close(top.y, (f64::MAX - 0.525e-9 * f64::MAX, f64::MAX)), "{:?}", top.y);
        assert!(top.y.1 == f64::MAX);
        let bottom = ranges(&[(0.0, f64::MIN)]).y;
        assert!(bottom.0 == f64::MIN && close(bottom, (f64::MIN, f64::MIN + 0.525e-9 * f64::MAX)), "{bottom:?}");
        // Under 1e-12 wide is no width; 1e-12 is a range, its two values ticks.
        assert_eq!(ranges(&[(0.0, 0.0), (1e-13, 0.0)]).x, (0.0, 1.0));
        let narrow = ranges(&[(0.0, 0.0), (1e-12, 0.0)]);
        assert_eq!(narrow.ticks_at_data, Some(vec![0.0, 1e-12]));
        assert!(close(narrow.x, (-0.04e-12, 1.04e-12)), "{:?}", narrow.x);
        let y = ranges(&[(0.0, 0.0), (0.0, 10.0)]).y;
        assert!(close(y, (-0.5, 10.5)), "{y:?}");
        let threads = ranges(&[(1.0, 1.0), (2.0, 1.0), (4.0, 2.0), (8.0, 3.0)]);
        assert_eq!(threads.ticks_at_data, Some(vec![1.0, 2.0, 4.0, 8.0]));
        assert!(close(threads.x, (0.72, 8.28)), "{:?}", threads.x);
        assert!(close(threads.y, (0.9, 3.1)), "{:?}", threads.y);
        let many: Vec<(f64, f64)> = (0..13).map(|i| (f64::from(i), 0.0)).collect();
        assert_eq!((ranges(&many).x, ranges(&many).ticks_at_data), ((0.0, 12.0), None));
        assert!(chart_ranges("t", &[(0.0, 0.0), (0.0, f64::MAX)]).unwrap_err().contains("y values"));
    }

    /// The data ticks' axis maps as a plain one does and draws its bold lines, labels
    /// included, at the data's values only, with no light lines between them.
    #[test]
    fn data_ticks_map_as_the_range_and_stand_at_the_values() {
        use plotters::coord::ranged1d::{BoldPoints, LightPoints};
        let plain: RangedCoordf64 = (0.5..8.5).into();
        let axis = DataTicks { inner: (0.5..8.5).into(), ticks: vec![1.0, 2.0, 4.0, 8.0] };
        for v in [0.5, 1.0, 3.3, 8.5] {
            assert_eq!(axis.map(&v, (10, 810)), plain.map(&v, (10, 810)), "{v}");
        }
        assert_eq!(axis.map(&4.5, (10, 810)), 410);
        assert_eq!(axis.range(), 0.5..8.5);
        assert_eq!(axis.key_points(BoldPoints(3)), [1.0, 2.0, 4.0, 8.0]);
        assert_eq!(axis.key_points(LightPoints::new(4, 40)), Vec::<f64>::new());
    }

    #[test]
    fn ticks_read_as_round_numbers() {
        let ticks = [0.0, 1e-10, -1e-10, 0.5, -0.5, 3.0, 0.01, 99.5, 150.7, 1e5, 3e-3, -2e6].map(format_tick);
        assert_eq!(ticks, ["0", "0", "0", "0.50", "-0.50", "3", "0.01", "99.50", "151", "1e5", "3e-3", "-2e6"]);
        assert_eq!(format_tick(1e-9), "1e-9", "a billionth is no rounding noise");
        let data =
            [0.0, 3.000_000_000_1, 3.01, -7.0, 1e15, 999_999_999_999_999.0, 1_000_000.000_1].map(format_data_tick);
        assert_eq!(data, ["0", "3", "3.01", "-7", "1e15", "999999999999999", "1000000"]);
        let log = [0.01, 0.0099, 99_999.0, 1e5, 0.999].map(format_log_tick);
        assert_eq!(log, ["0.010", "1e-2", "100000", "1e5", "1.00"]);
    }

    /// Quarters split at the middle of each axis; a point on a middle line counts to the left
    /// or below it.
    #[test]
    fn points_on_the_middle_lines_count_to_the_left_and_below() {
        let pts = [(0.75, 0.75), (0.25, 0.75), (0.75, 0.25), (0.25, 0.25), (0.5, 0.75), (0.75, 0.5), (0.5, 0.5)];
        assert_eq!(quarter_counts(&pts, (0.0, 1.0), (0.0, 1.0)), [1, 2, 2, 2]);
        assert_eq!(quarter_counts(&[(5.0, 20.0)], (4.0, 8.0), (10.0, 20.0)), [0, 1, 0, 0]);
        assert_eq!(emptiest([3, 1, 1, 2]), 1, "the first of equal counts");
    }

    /// Lines are sampled at seven points between each two of their points; a scatter has no
    /// line to avoid.
    #[test]
    fn lines_are_sampled_between_their_points_and_scatters_not() {
        let mut p = panel(false, vec![(0.0, 0.0), (8.0, 16.0), (16.0, 0.0)]);
        let samples = along_lines(&p, &|s: &Series| s.points.clone());
        let want: Vec<(f64, f64)> = (1..8)
            .map(|i| (f64::from(i), 2.0 * f64::from(i)))
            .chain((1..8).map(|i| (8.0 + f64::from(i), 16.0 - 2.0 * f64::from(i))))
            .collect();
        assert_eq!(samples, want);
        p.series[0].stroke = Stroke::Points;
        assert!(along_lines(&p, &|s: &Series| s.points.clone()).is_empty());
    }

    /// An owner map's box is its owner's colour, down to half of it (rounded down) at the
    /// highest load.
    #[test]
    fn owner_colours_darken_to_half_with_the_load() {
        let c = crate::colour::owner_colour(5);
        let full = RGBColor(c[0], c[1], c[2]);
        assert_eq!(shaded_owner_colour(5, 0.0), full);
        assert_eq!(shaded_owner_colour(5, -1.0), full);
        let half = RGBColor(c[0] / 2, c[1] / 2, c[2] / 2);
        assert_eq!((shaded_owner_colour(5, 1.0), shaded_owner_colour(5, 3.0)), (half, half));
        let quarter = |v: u8| (f64::from(v) * 0.875) as u8;
        assert_eq!(shaded_owner_colour(5, 0.25), RGBColor(quarter(c[0]), quarter(c[1]), quarter(c[2])));
    }

    /// `m` drawn alone, 400 pixels wide, into `path` and read back: width, height and each
    /// pixel's colour, row by row.
    fn drawn(path: &Path, m: OwnerMap<'_>) -> (usize, usize, Vec<[u8; 3]>) {
        owner_maps(path, 1, 400, &[m]).unwrap();
        let decoder = png::Decoder::new(std::io::BufReader::new(std::fs::File::open(path).unwrap()));
        let mut reader = decoder.read_info().unwrap();
        let mut buf = vec![0; reader.output_buffer_size()];
        let info = reader.next_frame(&mut buf).unwrap();
        std::fs::remove_file(path).ok();
        let (w, h) = (info.width as usize, info.height as usize);
        let channels = buf.len() / (w * h);
        (w, h, buf.chunks(channels).map(|c| [c[0], c[1], c[2]]).collect())
    }

    /// An owner map puts box `(i, j)` at column `i` and row `j` counted from the bottom, in
    /// its owner's colour shaded by its share of the highest load, in a panel as high as the
    /// grid is for its width plus 30 pixels of title; a vCore is a black dot.
    #[test]
    fn owner_maps_draw_each_box_where_it_lies_in_its_shade() {
        let path = std::env::temp_dir().join(format!("pbs-plot-where-{}.png", std::process::id()));
        let grid = Grid::new(4, 2).unwrap();
        // Owners 0 on the left half, 1 on the right; box 0 (bottom left) and box 7 (top
        // right) carry no load, box 1 half the others'.
        let owners = [0, 0, 1, 1, 0, 0, 1, 1];
        let loads = [0.0, 1.0, 2.0, 2.0, 2.0, 2.0, 2.0, 0.0];
        let m = OwnerMap { title: "m".into(), grid, loads: &loads, owners: &owners, positions: &[[2.0, 1.0, 0.0]] };
        let (w, h, pixels) = drawn(&path, m);
        assert_eq!((w, h), (400, 230));
        let at = |x: usize, y: usize| pixels[y * w + x];
        let rgb = |c: RGBColor| [c.0, c.1, c.2];
        let pixels_of = |c: [u8; 3]| -> Vec<(usize, usize)> {
            (0..h).flat_map(|y| (0..w).map(move |x| (x, y))).filter(|&(x, y)| at(x, y) == c).collect()
        };
        let span = |p: &[(usize, usize)]| {
            let xs = p.iter().map(|q| q.0);
            let ys = p.iter().map(|q| q.1);
            (xs.clone().min().unwrap(), xs.max().unwrap(), ys.clone().min().unwrap(), ys.max().unwrap())
        };
        // The unloaded boxes in full colour: box 0 in the lower left quarter of the map, box 7
        // in the upper right; each about a quarter of the map wide and half of it high.
        let (x0, x1, y0, y1) = span(&pixels_of(rgb(shaded_owner_colour(0, 0.0))));
        assert!(x1 < w / 3 && y0 > h / 2 && x1 - x0 > w / 6 && y1 - y0 > h / 4, "box 0 at {x0}..{x1} × {y0}..{y1}");
        let (x0, x1, y0, y1) = span(&pixels_of(rgb(shaded_owner_colour(1, 0.0))));
        assert!(
            x0 > 2 * w / 3 && y1 < h / 2 + 15 && x1 - x0 > w / 6 && y1 - y0 > h / 4,
            "box 7 at {x0}..{x1} × {y0}..{y1}"
        );
        // The loaded boxes of each owner, darker, on its side of the middle.
        let (_, left_end, _, _) = span(&pixels_of(rgb(shaded_owner_colour(0, 1.0))));
        let (right_start, _, _, _) = span(&pixels_of(rgb(shaded_owner_colour(1, 1.0))));
        assert!(left_end < w / 2 + 2 && right_start > w / 2 - 2, "owner 0 to {left_end}, owner 1 from {right_start}");
        // Box 1 at half the highest load: half as much darker.
        let (x0, x1, _, _) = span(&pixels_of(rgb(shaded_owner_colour(0, 0.5))));
        assert!(x0 > w / 5 && x1 < w / 2 + 2, "box 1 at {x0}..{x1}");
        // The vCore at (2, 1): a dot at the map's centre.
        let (x0, x1, y0, y1) = span(
            &pixels_of([0, 0, 0])
                .into_iter()
                .filter(|&(x, y)| (150..250).contains(&x) && (60..200).contains(&y))
                .collect::<Vec<_>>(),
        );
        let (cx, cy) = ((x0 + x1) / 2, (y0 + y1) / 2);
        assert!(cx.abs_diff(w / 2) <= 3 && cy.abs_diff(15 + h / 2) <= 12 && x1 - x0 <= 8, "dot around ({cx}, {cy})");
    }

    /// A 3D grid's owner map is the block of its layers, as square as their count allows,
    /// first layer at the top left; a vCore shows on the layer that holds it and no other.
    #[test]
    fn owner_maps_draw_a_3d_grid_layer_by_layer() {
        let path = std::env::temp_dir().join(format!("pbs-plot-layers-{}.png", std::process::id()));
        let grid = Grid::new_3d(2, 2, 3).unwrap();
        // Layer z is owner z's alone, unloaded: three flat colours.
        let owners: Vec<u32> = (0..12).map(|b| b / 4).collect();
        let m = OwnerMap { title: "m".into(), grid, loads: &[0.0; 12], owners: &owners, positions: &[[1.0, 1.0, 1.5]] };
        let (w, h, pixels) = drawn(&path, m);
        // Two layers a row, each 200 pixels square plus its caption, two rows, the title.
        assert_eq!((w, h), (400, 2 * (200 + 16) + 30));
        let at = |x: usize, y: usize| pixels[y * w + x];
        let span = |c: RGBColor| {
            let p: Vec<(usize, usize)> = (0..h)
                .flat_map(|y| (0..w).map(move |x| (x, y)))
                .filter(|&(x, y)| at(x, y) == [c.0, c.1, c.2])
                .collect();
            assert!(!p.is_empty(), "no pixel of {c:?}");
            let xs = p.iter().map(|q| q.0);
            let ys = p.iter().map(|q| q.1);
            (xs.clone().min().unwrap(), xs.max().unwrap(), ys.clone().min().unwrap(), ys.max().unwrap())
        };
        let (x0, x1, y0, y1) = span(shaded_owner_colour(0, 0.0));
        assert!(x1 < w / 2 && y1 < h / 2 + 15 && x1 - x0 > w / 3 && y0 > 30, "layer 0 at {x0}..{x1} × {y0}..{y1}");
        let (x0, _, _, y1) = span(shaded_owner_colour(1, 0.0));
        assert!(x0 > w / 2 && y1 < h / 2 + 15, "layer 1 from {x0}, to row {y1}");
        let (_, x1, y0, _) = span(shaded_owner_colour(2, 0.0));
        assert!(x1 < w / 2 && y0 > h / 2, "layer 2 to {x1}, from row {y0}");
        // The vCore at (1, 1, 1.5): a dot at the middle of layer 1 (top right), none at the
        // same place on layers 0 and 2 (the captions' text is black too, so only the middles).
        let black_near = |cx: usize, cy: usize| {
            (cy - 12..cy + 12)
                .flat_map(|y| (cx - 12..cx + 12).map(move |x| (x, y)))
                .filter(|&(x, y)| at(x, y) == [0; 3])
                .count()
        };
        let middle_y = |row: usize| 30 + row * 216 + 16 + 100;
        assert!(black_near(300, middle_y(0)) > 10, "no dot on layer 1");
        assert_eq!((black_near(100, middle_y(0)), black_near(100, middle_y(1))), (0, 0), "a dot on layer 0 or 2");
    }

    /// Up to 16 layers all show; deeper grids show 16 spread from the first to the last.
    #[test]
    fn deep_grids_show_sixteen_layers_spread_evenly() {
        assert_eq!(layers_shown(1), vec![0]);
        assert_eq!(layers_shown(16), (0..16).collect::<Vec<_>>());
        let deep = layers_shown(40);
        assert_eq!((deep.len(), deep[0], deep[15]), (16, 0, 39));
        assert!(deep.windows(2).all(|p| p[1] > p[0] && p[1] - p[0] <= 3), "{deep:?}");
        // Each the nearest layer to its even share of the depth.
        assert_eq!(deep, [0, 3, 5, 8, 10, 13, 16, 18, 21, 23, 26, 29, 31, 34, 36, 39]);
        assert_eq!(layers_shown(24), [0, 2, 3, 5, 6, 8, 9, 11, 12, 14, 15, 17, 18, 20, 21, 23]);
        assert_eq!(
            (layer_block(1), layer_block(3), layer_block(16), layer_block(10)),
            ((1, 1), (2, 2), (4, 4), (4, 3))
        );
    }

    /// A series at a single x (an axis of no width) is still drawn: its dot shows.
    #[test]
    fn a_single_point_is_drawn() {
        let mut p = panel(false, vec![(3.0, 5.0)]);
        p.series[0].stroke = Stroke::Points;
        let (w, h) = (300u32, 200u32);
        let mut rgb = vec![0u8; (w * h * 3) as usize];
        line_panels_rgb(&mut rgb, w, h, 1, &[p]).unwrap();
        let c = PALETTE[0];
        let inked = rgb.chunks(3).filter(|px| px == &[c.0, c.1, c.2]).count();
        assert!(inked >= 9, "{inked} pixels of the series' colour");
    }

    fn panel(log_y: bool, points: Vec<(f64, f64)>) -> Panel {
        let series = vec![Series { label: "a".into(), points, color: PALETTE[0], stroke: Stroke::Solid }];
        Panel { log_y, ..of_series(series) }
    }

    /// A panel titled `p` over these series, linear axes.
    fn of_series(series: Vec<Series>) -> Panel {
        Panel { title: "p".into(), x_label: "x".into(), y_label: "y".into(), log_x: false, log_y: false, series }
    }

    /// Points no chart can show are left out; a span too wide to scale, a size beyond
    /// `MAX_SIDE` are errors. Before, an infinite point or a span from 0 to 1.79e308 hung the
    /// drawing crate's ticks, a NaN on a log axis was drawn at 1e-300, and 100,000 pixels
    /// a side panicked inside it.
    #[test]
    fn points_no_chart_can_show_are_left_out_and_impossible_pictures_refused() {
        let draw = |p: Panel| {
            let mut rgb = vec![0u8; 200 * 150 * 3];
            line_panels_rgb(&mut rgb, 200, 150, 1, &[p]).map(|()| rgb)
        };
        let plain = draw(panel(true, vec![(1.0, 10.0), (2.0, 100.0)])).unwrap();
        let unshowable = [(0.5, f64::NAN), (1.0, 10.0), (1.5, 0.0), (f64::INFINITY, 5.0), (1.7, -3.0), (2.0, 100.0)];
        assert_eq!(draw(panel(true, unshowable.to_vec())).unwrap(), plain, "the same picture without them");
        let max = f64::MAX;
        for extreme in
            [vec![(1e300, 1e300)], vec![(-max, -max), (-max + MAX_SPAN / 2.0, -max + MAX_SPAN / 2.0)], vec![(max, max)]]
        {
            draw(panel(false, extreme)).unwrap();
        }
        for wide in [vec![(-1e308, 0.0), (1e308, 1.0)], vec![(0.0, 0.0), (1.0, 1.79e308)]] {
            let wide = draw(panel(false, wide)).unwrap_err();
            assert!(wide.contains("panel \"p\"") && wide.contains("wider than a chart can scale"), "{wide}");
        }
        for (w, h) in [(0, 10), (10, 0), (MAX_SIDE + 1, 10), (100_000, 100_000)] {
            let e = line_panels_rgb(&mut [], w, h, 1, &[]).unwrap_err();
            assert!(e.contains(&format!("{w}×{h} pixels")), "{e}");
        }
        for (w, h) in [(MAX_SIDE, 1), (1, MAX_SIDE), (MAX_SIDE, MAX_SIDE)] {
            check_size(w, h).unwrap();
        }
        check_size(1, MAX_SIDE + 1).unwrap_err();
        // The drawing crate's own errors come back with the crate's name before them.
        let missing = std::env::temp_dir().join(format!("pbs-plot-none-{}", std::process::id())).join("p.png");
        let e = line_panels(&missing, 200, 150, 1, &[panel(false, vec![(1.0, 1.0), (2.0, 2.0)])]).unwrap_err();
        assert!(e.starts_with("plot: ") && e.ends_with(&format!("(writing {})", missing.display())), "{e}");
        let grid = Grid::new(2, 2).unwrap();
        let map = OwnerMap { title: "m".into(), grid, loads: &[1.0; 4], owners: &[0; 4], positions: &[] };
        let e = owner_maps(&missing, 1, 100, &[map]).unwrap_err();
        assert!(e.starts_with("plot: ") && e.ends_with(&format!("(writing {})", missing.display())), "{e}");
    }

    /// Owner maps refuse what they cannot draw: no column, no map, fewer owners or loads than
    /// boxes (before: a division by zero and an index out of bounds), a picture too large.
    #[test]
    fn owner_maps_refuse_what_they_cannot_draw() {
        let path = std::env::temp_dir().join(format!("pbs-plot-maps-{}.png", std::process::id()));
        let grid = Grid::new(4, 4).unwrap();
        let (loads, owners) = (vec![1.0; 16], vec![0u32; 16]);
        let map = |owners| OwnerMap { title: "m".into(), grid, loads: &loads, owners, positions: &[] };
        let refused = |cols, px, maps: &[OwnerMap<'_>]| owner_maps(&path, cols, px, maps).unwrap_err();
        assert!(refused(0, 100, &[map(&owners)]).contains("in 0 columns"));
        assert!(refused(1, 100, &[]).contains("0 owner maps"));
        assert!(refused(1, 100, &[map(&owners[..3])]).contains("16 loads and 3 owners for 16 boxes"));
        let short = OwnerMap { title: "m".into(), grid, loads: &loads[..3], owners: &owners, positions: &[] };
        assert!(refused(1, 100, &[short]).contains("3 loads and 16 owners for 16 boxes"));
        assert!(refused(3, 6000, &[map(&owners)]).contains("18000×6030 pixels"));
        owner_maps(&path, 1, 100, &[map(&owners)]).unwrap();
        std::fs::remove_file(&path).unwrap();
    }
}
