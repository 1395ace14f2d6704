//! The map of a [`Scene`] drawn into pixels: the loads as a heat map or as owner colours shaded
//! by load, cell outlines, displacement arrows and one marker per vCore. The window shows this
//! very picture and the headless mode writes it, so what a test checks is what a person sees.

use std::path::Path;

use pbs::{Grid, Point};

use crate::scene::Scene;

/// An RGBA picture, rows top to bottom.
#[derive(Debug, Clone, PartialEq)]
pub struct Picture {
    /// Width in pixels.
    pub width: usize,
    /// Height in pixels.
    pub height: usize,
    /// `width × height × 4` bytes.
    pub rgba: Vec<u8>,
}

impl Picture {
    /// A picture filled with one colour.
    pub fn new(width: usize, height: usize, fill: [u8; 3]) -> Picture {
        let rgba = [fill[0], fill[1], fill[2], 255].repeat(width * height);
        Picture { width, height, rgba }
    }

    /// The colour of pixel `(x, y)`.
    pub fn get(&self, x: usize, y: usize) -> [u8; 3] {
        let o = 4 * (y * self.width + x);
        [self.rgba[o], self.rgba[o + 1], self.rgba[o + 2]]
    }

    fn set(&mut self, x: i64, y: i64, c: [u8; 3]) {
        if x >= 0 && y >= 0 && (x as usize) < self.width && (y as usize) < self.height {
            let o = 4 * (y as usize * self.width + x as usize);
            self.rgba[o..o + 3].copy_from_slice(&c);
        }
    }

    /// Copies `other` with its top-left corner at `(x, y)` (clipped).
    pub fn blit(&mut self, other: &Picture, x: usize, y: usize) {
        for row in 0..other.height.min(self.height.saturating_sub(y)) {
            let w = other.width.min(self.width.saturating_sub(x));
            let src = &other.rgba[4 * row * other.width..4 * (row * other.width + w)];
            let o = 4 * ((y + row) * self.width + x);
            self.rgba[o..o + 4 * w].copy_from_slice(src);
        }
    }

    /// Writes a PNG file.
    pub fn write_png(&self, path: &Path) -> Result<(), String> {
        let err = |e: &dyn std::fmt::Display| format!("writing {}: {e}", path.display());
        let file = std::fs::File::create(path).map_err(|e| err(&e))?;
        let mut enc = png::Encoder::new(std::io::BufWriter::new(file), self.width as u32, self.height as u32);
        enc.set_color(png::ColorType::Rgba);
        enc.set_depth(png::BitDepth::Eight);
        let mut w = enc.write_header().map_err(|e| err(&e))?;
        w.write_image_data(&self.rgba).map_err(|e| err(&e))
    }

    /// Reads a PNG file (8-bit RGB or RGBA), for tests and tools that check pictures.
    pub fn read_png(path: &Path) -> Result<Picture, String> {
        let err = |e: &dyn std::fmt::Display| format!("reading {}: {e}", path.display());
        let file = std::fs::File::open(path).map_err(|e| err(&e))?;
        let mut dec = png::Decoder::new(std::io::BufReader::new(file));
        dec.set_transformations(png::Transformations::EXPAND | png::Transformations::STRIP_16);
        let mut reader = dec.read_info().map_err(|e| err(&e))?;
        let mut buf = vec![0; reader.output_buffer_size()];
        let info = reader.next_frame(&mut buf).map_err(|e| err(&e))?;
        let (w, h) = (info.width as usize, info.height as usize);
        let rgba = match info.color_type {
            png::ColorType::Rgba => buf[..w * h * 4].to_vec(),
            png::ColorType::Rgb => buf[..w * h * 3].chunks(3).flat_map(|c| [c[0], c[1], c[2], 255]).collect(),
            other => return Err(err(&format!("unsupported colour type {other:?}"))),
        };
        Ok(Picture { width: w, height: h, rgba })
    }
}

/// How boxes are filled.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fill {
    /// The owner's colour, darker where the load is higher.
    Owner,
    /// A heat map of the load; cells show as outlines only.
    Heat,
}

/// How to draw a map.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Style {
    /// Pixels per box side.
    pub px: usize,
    /// Box fill.
    pub fill: Fill,
    /// Draw displacement arrows.
    pub arrows: bool,
}

impl Style {
    /// Pixels per box so that the longer side of `grid`'s map ([`MapLayout`]: a 3D grid's
    /// layers side by side) is about `target` pixels (at least 1).
    pub fn fit(grid: &Grid, target: usize) -> Style {
        let (w, h) = MapLayout::extent_in_boxes(grid);
        Style { px: (target / w.max(h).max(1)).max(1), fill: Fill::Owner, arrows: true }
    }

    /// Pixel radius of a marker.
    pub fn marker_radius(&self) -> f64 {
        (1.2 * self.px as f64).max(4.0)
    }
}

/// Where a point in box units lands in the picture of a grid `ny` boxes high (y grows upward
/// in the domain, downward in the picture).
pub fn to_pixel(p: [f64; 2], ny: usize, px: usize) -> [f64; 2] {
    [p[0] * px as f64, (ny as f64 - p[1]) * px as f64]
}

/// The inverse of [`to_pixel`].
pub fn to_domain(q: [f64; 2], ny: usize, px: usize) -> [f64; 2] {
    [q[0] / px as f64, ny as f64 - q[1] / px as f64]
}

/// Where a grid's layers lie in its map: a 2D grid is one layer filling the picture; a 3D grid
/// is the block of the layers [`layers_shown`] picks (all of them up to 16), as square as their
/// count allows, z = 0 at the top left and z growing along the rows, one box of white between
/// layers.
#[derive(Debug, Clone, PartialEq)]
pub struct MapLayout {
    grid: Grid,
    px: usize,
    layers: Vec<usize>,
    cols: usize,
}

impl MapLayout {
    /// The layout of `grid`'s map at `px` pixels a box.
    pub fn new(grid: &Grid, px: usize) -> MapLayout {
        let layers = layers_shown(grid.nz());
        let (cols, _) = layer_block(layers.len());
        MapLayout { grid: *grid, px, layers, cols }
    }

    /// Boxes the map spans across and up, the gaps between layers counted as boxes.
    pub fn extent_in_boxes(grid: &Grid) -> (usize, usize) {
        let (cols, rows) = layer_block(layers_shown(grid.nz()).len());
        (cols * (grid.nx() + 1) - 1, rows * (grid.ny() + 1) - 1)
    }

    /// The layers drawn, in the order of their places (row by row).
    pub fn layers(&self) -> &[usize] {
        &self.layers
    }

    /// The picture's width and height in pixels.
    pub fn size(&self) -> (usize, usize) {
        let (w, h) = Self::extent_in_boxes(&self.grid);
        (w * self.px, h * self.px)
    }

    /// The top-left pixel of the `slot`-th layer drawn.
    fn origin(&self, slot: usize) -> [usize; 2] {
        let (nx, ny) = (self.grid.nx(), self.grid.ny());
        [(slot % self.cols) * (nx + 1) * self.px, (slot / self.cols) * (ny + 1) * self.px]
    }

    /// Where a point in box units lands: on the layer that holds it (`z` in `[l, l + 1)`; a 2D
    /// grid's one layer whatever `z`), `None` where that layer is not drawn.
    pub fn to_pixel(&self, p: Point) -> Option<[f64; 2]> {
        let slot = if self.layers.len() == 1 {
            0
        } else {
            let z = p[2].floor();
            self.layers.iter().position(|&l| l as f64 == z)?
        };
        let [x0, y0] = self.origin(slot);
        let q = to_pixel([p[0], p[1]], self.grid.ny(), self.px);
        Some([x0 as f64 + q[0], y0 as f64 + q[1]])
    }

    /// The point in box units under pixel `q`, at the middle of its layer's depth; `None` in
    /// the gaps between layers and outside the map.
    pub fn to_domain(&self, q: [f64; 2]) -> Option<Point> {
        if !(q[0] >= 0.0 && q[1] >= 0.0) {
            return None;
        }
        let (nx, ny) = (self.grid.nx(), self.grid.ny());
        let (col, row) = ((q[0] / ((nx + 1) * self.px) as f64) as usize, (q[1] / ((ny + 1) * self.px) as f64) as usize);
        let slot = row * self.cols + col;
        if col >= self.cols || slot >= self.layers.len() {
            return None;
        }
        let [x0, y0] = self.origin(slot);
        let (x, y) = (q[0] - x0 as f64, q[1] - y0 as f64);
        if x >= (nx * self.px) as f64 || y >= (ny * self.px) as f64 {
            return None;
        }
        let p = to_domain([x, y], ny, self.px);
        Some([p[0], p[1], self.layers[slot] as f64 + 0.5])
    }
}

/// For a status line: which layers a 3D grid's map shows, in what order; `None` in 2D.
pub fn layers_note(grid: &Grid) -> Option<String> {
    let shown = layers_shown(grid.nz());
    match shown.len() {
        1 => None,
        n if n == grid.nz() => Some(format!("layers z = 0 to {} row by row from the top left", n - 1)),
        _ => Some(format!(
            "layers z = {} of 0 to {} row by row from the top left",
            shown.iter().map(|z| z.to_string()).collect::<Vec<_>>().join(", "),
            grid.nz() - 1
        )),
    }
}

pub use pbs_plot::colour::{heat_colour, owner_colour};
use pbs_plot::panels::layer_block;
pub use pbs_plot::panels::layers_shown;

const INK: [u8; 3] = [20, 20, 20];

/// Draws the map of `scene` ([`MapLayout`]: a 3D grid's layers side by side), its size
/// [`MapLayout::size`]; a marker and its arrow show on the layer that holds the marker.
pub fn render_map(scene: &Scene, style: &Style) -> Picture {
    let layout = MapLayout::new(&scene.grid, style.px);
    let (w, h) = layout.size();
    let mut pic = Picture::new(w, h, [255, 255, 255]);
    let max = scene.loads.iter().copied().fold(0.0_f64, f64::max).max(f64::MIN_POSITIVE);
    for (slot, &z) in layout.layers().iter().enumerate() {
        draw_layer(&mut pic, scene, style, z, layout.origin(slot), max);
    }
    if style.arrows && !scene.arrows.is_empty() {
        // The longest arrow is drawn 6 boxes long, the others in proportion.
        let longest = scene.arrows.iter().map(|a| a[0].hypot(a[1])).fold(0.0, f64::max);
        if longest > 1e-9 {
            let scale = 6.0 / longest;
            for (m, a) in scene.markers.iter().zip(&scene.arrows) {
                let tip = [m[0] + a[0] * scale, m[1] + a[1] * scale, m[2]];
                if let (Some(from), Some(to)) = (layout.to_pixel(*m), layout.to_pixel(tip)) {
                    arrow(&mut pic, from, to, (style.px as f64 * 0.35).max(1.0));
                }
            }
        }
    }
    let r = style.marker_radius();
    for (i, m) in scene.markers.iter().enumerate() {
        if let Some(c) = layout.to_pixel(*m) {
            disc(&mut pic, c, r + 1.5, INK);
            disc(&mut pic, c, r, owner_colour(i as u32));
        }
    }
    pic
}

/// Layer `z` of `scene`'s grid, its top-left pixel at `origin`: boxes filled, then the cell
/// outlines (a line between boxes of different owners; too crowded below 3 px a box).
fn draw_layer(pic: &mut Picture, scene: &Scene, style: &Style, z: usize, origin: [usize; 2], max: f64) {
    let (nx, ny, px) = (scene.grid.nx(), scene.grid.ny(), style.px);
    let owner = |i: usize, j: usize| scene.owners[scene.grid.index(i, j, z)];
    for j in 0..ny {
        for i in 0..nx {
            let k = scene.grid.index(i, j, z);
            let shade = scene.loads[k] / max;
            let c = match style.fill {
                Fill::Owner => owner_colour(scene.owners[k]).map(|v| (f64::from(v) * (1.0 - 0.6 * shade)) as u8),
                Fill::Heat => heat_colour(shade),
            };
            // Row j of the domain is drawn from the bottom up.
            let (x0, y0) = (origin[0] + i * px, origin[1] + (ny - 1 - j) * px);
            for y in y0..y0 + px {
                let o = 4 * (y * pic.width + x0);
                for x in 0..px {
                    pic.rgba[o + 4 * x..o + 4 * x + 3].copy_from_slice(&c);
                }
            }
        }
    }
    if px >= 3 {
        let line = if style.fill == Fill::Heat { [255, 255, 255] } else { INK };
        for j in 0..ny {
            for i in 0..nx {
                let (x0, y0) = ((origin[0] + i * px) as i64, (origin[1] + (ny - 1 - j) * px) as i64);
                if i + 1 < nx && owner(i, j) != owner(i + 1, j) {
                    for y in y0..y0 + px as i64 {
                        pic.set(x0 + px as i64 - 1, y, line);
                        pic.set(x0 + px as i64, y, line);
                    }
                }
                if j + 1 < ny && owner(i, j) != owner(i, j + 1) {
                    for x in x0..x0 + px as i64 {
                        pic.set(x, y0, line);
                        pic.set(x, y0 - 1, line);
                    }
                }
            }
        }
    }
}

fn disc(pic: &mut Picture, c: [f64; 2], r: f64, colour: [u8; 3]) {
    let (x0, x1) = ((c[0] - r).floor() as i64, (c[0] + r).ceil() as i64);
    let (y0, y1) = ((c[1] - r).floor() as i64, (c[1] + r).ceil() as i64);
    for y in y0..=y1 {
        for x in x0..=x1 {
            let (dx, dy) = (x as f64 + 0.5 - c[0], y as f64 + 0.5 - c[1]);
            if dx * dx + dy * dy <= r * r {
                pic.set(x, y, colour);
            }
        }
    }
}

fn segment(pic: &mut Picture, a: [f64; 2], b: [f64; 2], half_width: f64) {
    let len = (b[0] - a[0]).hypot(b[1] - a[1]);
    let n = (len * 2.0).ceil().max(1.0) as usize;
    for s in 0..=n {
        let t = s as f64 / n as f64;
        disc(pic, [a[0] + t * (b[0] - a[0]), a[1] + t * (b[1] - a[1])], half_width, INK);
    }
}

fn arrow(pic: &mut Picture, from: [f64; 2], to: [f64; 2], half_width: f64) {
    segment(pic, from, to, half_width);
    let (dx, dy) = (to[0] - from[0], to[1] - from[1]);
    let len = dx.hypot(dy);
    if len < 1.0 {
        return;
    }
    let head = (len * 0.35).min(4.0 * half_width + 4.0);
    let (ux, uy) = (dx / len, dy / len);
    for side in [-1.0, 1.0] {
        let back = [to[0] - head * (ux - 0.5 * side * uy), to[1] - head * (uy + 0.5 * side * ux)];
        segment(pic, to, back, half_width);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scene::SceneKind;
    use pbs::Grid;

    /// A cube's map is its layers in a block, z = 0 at the top left, one box of white between
    /// them; points map to pixels on their own layer and back, gaps to nothing.
    #[test]
    fn a_cubes_map_is_a_block_of_its_layers() {
        let grid = Grid::new_3d(4, 2, 3).unwrap();
        let owners: Vec<u32> = (0..24).map(|k| k as u32 / 8).collect();
        let scene = Scene {
            grid,
            owners,
            loads: vec![0.0; 24],
            markers: vec![[1.5, 0.5, 2.25]],
            ..crate::scene::tests::blank(4, 2)
        };
        let style = Style { px: 10, fill: Fill::Owner, arrows: false };
        let layout = MapLayout::new(&grid, 10);
        assert_eq!((layout.size(), layout.layers()), ((90, 50), &[0, 1, 2][..]));
        let pic = render_map(&scene, &style);
        assert_eq!((pic.width, pic.height), (90, 50));
        // Layer 0 top left, layer 1 top right, layer 2 bottom left, white between and after.
        assert_eq!((pic.get(5, 5), pic.get(55, 5)), (owner_colour(0), owner_colour(1)));
        assert_eq!((pic.get(45, 5), pic.get(5, 25), pic.get(75, 45)), ([255; 3], [255; 3], [255; 3]));
        // The marker at (1.5, 0.5) on layer 2: box (1, 0) of the bottom-left layer.
        assert_eq!(layout.to_pixel([1.5, 0.5, 2.25]), Some([15.0, 45.0]));
        assert_eq!(pic.get(15, 45), owner_colour(0), "vCore 0's marker");
        assert_eq!(pic.get(38, 32), owner_colour(2), "layer 2 around it");
        assert_eq!(layout.to_domain([15.0, 45.0]), Some([1.5, 0.5, 2.5]));
        assert_eq!(layout.to_domain([62.0, 13.0]), Some([1.2, 0.7, 1.5]));
        for gap in [[45.0, 5.0], [5.0, 25.0], [75.0, 45.0], [-1.0, 5.0], [95.0, 5.0], [5.0, 55.0]] {
            assert_eq!(layout.to_domain(gap), None, "{gap:?}");
        }
        assert_eq!(layout.to_pixel([1.0, 1.0, 3.0]), None, "no layer 3");
        // In 2D, the one layer fills the picture whatever a point's depth.
        let flat = MapLayout::new(&Grid::new(4, 2).unwrap(), 10);
        assert_eq!((flat.size(), flat.to_pixel([1.5, 0.5, 0.9])), ((40, 20), Some([15.0, 15.0])));
        assert_eq!(flat.to_domain([15.0, 15.0]), Some([1.5, 0.5, 0.5]));
        // Deep grids show 16 layers, and say which.
        assert_eq!(layers_note(&Grid::new(4, 2).unwrap()), None);
        assert_eq!(layers_note(&grid).unwrap(), "layers z = 0 to 2 row by row from the top left");
        let deep = layers_note(&Grid::new_3d(2, 2, 40).unwrap()).unwrap();
        assert!(deep.starts_with("layers z = 0, 3, 5,") && deep.contains(", 39 of 0 to 39"), "{deep}");
    }

    #[test]
    fn owner_colours_are_distinct_and_never_ink() {
        let mut seen = std::collections::HashSet::new();
        for i in 0..512 {
            let c = owner_colour(i);
            assert!(seen.insert(c), "owner {i} repeats colour {c:?}");
            assert_ne!(c, INK);
        }
    }

    #[test]
    fn pixels_and_domain_points_convert_both_ways() {
        let p = [3.25, 1.5];
        let q = to_pixel(p, 10, 4);
        assert_eq!(q, [13.0, 34.0]);
        assert_eq!(to_domain(q, 10, 4), p);
        assert_eq!(heat_colour(0.0), [0, 0, 4]);
        assert_eq!(heat_colour(1.0), [252, 255, 164]);
        assert_eq!(heat_colour(f64::NAN), [0, 0, 4]);
    }

    #[test]
    fn a_two_cell_map_is_drawn_where_the_state_says() {
        let grid = Grid::new(8, 4).unwrap();
        let owners: Vec<u32> = (0..32).map(|k| u32::from(grid.coords(k)[0] >= 4)).collect();
        let scene = Scene {
            kind: SceneKind::Balancer,
            grid,
            loads: vec![0.0; 32],
            owners,
            markers: vec![[2.0, 2.0, 0.5], [6.0, 1.0, 0.5]],
            arrows: vec![[1.0, 0.0], [0.0, 0.0]],
            history: vec![],
            bars: vec![],
            bars_label: "",
            status: String::new(),
        };
        let style = Style { px: 10, fill: Fill::Owner, arrows: true };
        let pic = render_map(&scene, &style);
        assert_eq!((pic.width, pic.height), (80, 40));
        // Zero load: boxes in their owner's own colour; the outline between x = 39 and 40.
        assert_eq!(pic.get(5, 5), owner_colour(0));
        assert_eq!(pic.get(75, 5), owner_colour(1));
        assert_eq!(pic.get(39, 5), INK);
        assert_eq!(pic.get(40, 5), INK);
        // Markers: vCore 1 at (6, 1) is drawn around pixel (60, 30).
        assert_eq!(pic.get(60, 30), owner_colour(1));
        assert_eq!(pic.get(20, 20), owner_colour(0));
        // vCore 0's arrow points to +x: ink right of its marker, beyond the ring.
        assert_eq!(pic.get(20 + style.marker_radius() as usize + 4, 20), INK);
        let heat = render_map(&scene, &Style { fill: Fill::Heat, ..style });
        assert_eq!(heat.get(5, 5), heat_colour(0.0));
    }

    /// A scene of `nx × ny` boxes with these owners and loads, markers and arrows.
    fn scene_of(
        nx: usize,
        ny: usize,
        owners: Vec<u32>,
        loads: Vec<f64>,
        markers: Vec<[f64; 2]>,
        arrows: Vec<[f64; 2]>,
    ) -> Scene {
        let markers = markers.into_iter().map(|m| [m[0], m[1], 0.5]).collect();
        Scene { owners, loads, markers, arrows, ..crate::scene::tests::blank(nx, ny) }
    }

    /// Owner fills darken to 0.4 of the colour at the highest load, in proportion below it;
    /// the heat fill gives the load's fraction of the highest; row 0 of the domain is drawn
    /// at the bottom.
    #[test]
    fn boxes_are_shaded_by_their_share_of_the_highest_load() {
        let loads = vec![0.0, 2.0, 4.0, 1.0];
        let scene = scene_of(2, 2, vec![3; 4], loads.clone(), vec![], vec![]);
        let style = Style { px: 4, fill: Fill::Owner, arrows: false };
        let pic = render_map(&scene, &style);
        let base = owner_colour(3);
        // Box k = (i, j) is at pixels x = 4i.., y = 4(1 − j)..; sampled at its centre.
        for (k, load) in loads.iter().enumerate() {
            let (i, j) = (k % 2, k / 2);
            let want = base.map(|v| (f64::from(v) * (1.0 - 0.6 * load / 4.0)) as u8);
            assert_eq!(pic.get(4 * i + 2, 4 * (1 - j) + 2), want, "box {k}");
        }
        let heat = render_map(&scene, &Style { fill: Fill::Heat, ..style });
        for (k, load) in loads.iter().enumerate() {
            let (i, j) = (k % 2, k / 2);
            assert_eq!(heat.get(4 * i + 2, 4 * (1 - j) + 2), heat_colour(load / 4.0), "box {k}");
        }
    }

    /// An outline of two pixels runs between boxes of different owners, across x and across
    /// y, in ink on owner fills and white on heat maps; none between boxes of one owner, and
    /// none at all below 3 pixels a box.
    #[test]
    fn outlines_run_between_owners_only() {
        // Owners 0 0 in row 0 (drawn at the bottom), 1 0 in row 1: box 2 (top left) is owner
        // 1, beside box 3 and above box 0.
        let scene = scene_of(2, 2, vec![0, 0, 1, 0], vec![0.0; 4], vec![], vec![]);
        let style = Style { px: 6, fill: Fill::Owner, arrows: false };
        let pic = render_map(&scene, &style);
        // Between box 2 (top left, x 0..6, y 0..6) and box 0 (bottom left, y 6..12): rows 5 and 6.
        assert_eq!((pic.get(2, 5), pic.get(2, 6)), (INK, INK));
        assert_eq!((pic.get(2, 4), pic.get(2, 7)), (owner_colour(1), owner_colour(0)));
        // Between box 2 and box 3 (top right): columns 5 and 6.
        assert_eq!((pic.get(5, 2), pic.get(6, 2)), (INK, INK));
        assert_eq!((pic.get(4, 2), pic.get(7, 2)), (owner_colour(1), owner_colour(0)));
        // Boxes 0 and 1 share an owner: no line between them (bottom row, columns 5 and 6).
        assert_eq!((pic.get(5, 9), pic.get(6, 9)), (owner_colour(0), owner_colour(0)));
        // Between box 1 (bottom right) and box 3 above it: the same owner, no line.
        assert_eq!((pic.get(9, 5), pic.get(9, 6)), (owner_colour(0), owner_colour(0)));
        let heat = render_map(&scene, &Style { fill: Fill::Heat, ..style });
        assert_eq!((heat.get(2, 5), heat.get(5, 2)), ([255; 3], [255; 3]));
        let small = render_map(&scene, &Style { px: 2, ..style });
        assert_eq!(
            (small.get(1, 1), small.get(2, 1), small.get(1, 2)),
            (owner_colour(1), owner_colour(0), owner_colour(0))
        );
    }

    /// A marker is a disc of its owner's colour of `marker_radius` pixels in an ink ring 1.5
    /// pixels wide; the longest arrow runs 6 boxes from its marker, with a head, and no arrow
    /// is drawn without `arrows` or without motion.
    #[test]
    fn markers_are_rings_and_the_longest_arrow_runs_six_boxes() {
        let owners = vec![0; 20 * 4];
        let scene = scene_of(20, 4, owners, vec![0.0; 80], vec![[2.0, 2.0], [17.0, 2.0]], vec![[2.0, 0.0], [0.0, 0.0]]);
        let style = Style { px: 10, fill: Fill::Owner, arrows: true };
        let r = style.marker_radius();
        assert_eq!(r, 12.0);
        let pic = render_map(&scene, &style);
        let (cx, cy) = (20usize, 20usize);
        assert_eq!(pic.get(cx, cy), owner_colour(0));
        assert_eq!(pic.get(cx - 11, cy), owner_colour(0), "inside the disc");
        assert_eq!(pic.get(cx - 13, cy), INK, "in the ring");
        assert_eq!(pic.get(cx - 15, cy), owner_colour(0), "beyond the ring: the box");
        assert_eq!(pic.get(170, 20), owner_colour(1), "the second marker in its own colour");
        // The arrow: ink along y = 20 from the ring to 6 boxes (60 px) on, nothing past the
        // tip's half width (3.5 px).
        for x in [35, 50, 65, 79] {
            assert_eq!(pic.get(x, cy), INK, "x {x}");
        }
        assert_eq!(pic.get(85, cy), owner_colour(0), "past the tip");
        // The head: ink a few pixels behind the tip, above and below the shaft.
        assert!((cy - 8..cy - 2).any(|y| pic.get(72, y) == INK) && (cy + 3..cy + 9).any(|y| pic.get(72, y) == INK));
        let without = render_map(&scene, &Style { arrows: false, ..style });
        assert_eq!(without.get(50, cy), owner_colour(0));
        let still = scene_of(20, 4, vec![0; 80], vec![0.0; 80], vec![[2.0, 2.0]], vec![[0.0, 0.0]]);
        assert_eq!(render_map(&still, &style).get(50, cy), owner_colour(0));
        // Fewer than 4 px a marker never: a radius of at least 4 pixels.
        assert_eq!(Style { px: 1, ..style }.marker_radius(), 4.0);
        assert_eq!(Style::fit(&Grid::new(300, 10).unwrap(), 600).px, 2);
        assert_eq!(Style::fit(&Grid::new(3000, 10).unwrap(), 600).px, 1);
        // A cube's layers side by side: 3 × 3 layers of 20 boxes and two gaps of one, 62.
        assert_eq!(Style::fit(&Grid::new_3d(20, 10, 9).unwrap(), 620).px, 10);
    }

    /// The distance from `p` to the segment `a`–`b`.
    fn to_segment(p: [f64; 2], a: [f64; 2], b: [f64; 2]) -> f64 {
        let (dx, dy) = (b[0] - a[0], b[1] - a[1]);
        let len2 = dx * dx + dy * dy;
        let t = if len2 == 0.0 { 0.0 } else { (((p[0] - a[0]) * dx + (p[1] - a[1]) * dy) / len2).clamp(0.0, 1.0) };
        (p[0] - a[0] - t * dx).hypot(p[1] - a[1] - t * dy)
    }

    /// The centres of the inked pixels of a white picture.
    fn inked(pic: &Picture) -> Vec<[f64; 2]> {
        (0..pic.height)
            .flat_map(|y| (0..pic.width).map(move |x| (x, y)))
            .filter(|&(x, y)| pic.get(x, y) == INK)
            .map(|(x, y)| [x as f64 + 0.5, y as f64 + 0.5])
            .collect()
    }

    /// A disc inks exactly the pixels whose centres lie within its radius, at whole, half and
    /// odd centres, also where it runs off the picture.
    #[test]
    fn a_disc_inks_the_pixels_whose_centres_it_covers() {
        // Pixels on the circle at the ends of each axis: (2, 5.5) and (5.5, 2) at radius 1.5,
        // (0.5, 5.5) and (5.5, 0.5) at radius 3.
        for (c, r) in [
            ([2.0, 5.5], 1.5),
            ([5.5, 2.0], 1.5),
            ([0.5, 5.5], 3.0),
            ([5.5, 0.5], 3.0),
            ([20.0, 15.0], 6.0),
            ([20.5, 15.5], 6.0),
            ([10.3, 22.8], 4.6),
            ([1.2, 0.7], 5.5),
            ([38.6, 28.1], 3.0),
        ] {
            let mut pic = Picture::new(40, 30, [255, 255, 255]);
            disc(&mut pic, c, r, INK);
            let mut expected = Vec::new();
            for y in 0..30 {
                for x in 0..40 {
                    let (dx, dy) = (x as f64 + 0.5 - c[0], y as f64 + 0.5 - c[1]);
                    if dx * dx + dy * dy <= r * r {
                        expected.push([x as f64 + 0.5, y as f64 + 0.5]);
                    }
                }
            }
            assert!(!expected.is_empty());
            assert_eq!(inked(&pic), expected, "disc at {c:?}, radius {r}");
        }
    }

    /// A segment and an arrow ink every pixel whose centre is within their half width of a
    /// stroke (less the 1/16 px the sampled discs may leave between them) and none farther;
    /// an arrow's strokes are its shaft and two head strokes of 0.35 × its length, at most
    /// 4 half widths + 4 px, spread at ±atan(1/2) behind the tip; under a pixel long, no head.
    #[test]
    fn segments_and_arrows_ink_their_strokes_to_the_half_width() {
        let head_strokes = |from: [f64; 2], to: [f64; 2], h: f64| -> Vec<([f64; 2], [f64; 2])> {
            let (dx, dy) = (to[0] - from[0], to[1] - from[1]);
            let len = dx.hypot(dy);
            let head = (0.35 * len).min(4.0 * h + 4.0);
            let (ux, uy) = (dx / len, dy / len);
            // Back along the shaft by `head`, then aside by half of it, either way.
            [-1.0, 1.0]
                .map(|side| {
                    (to, [to[0] - head * ux + side * 0.5 * head * uy, to[1] - head * uy - side * 0.5 * head * ux])
                })
                .to_vec()
        };
        let cases: [([f64; 2], [f64; 2], f64, bool); 10] = [
            ([5.5, 20.5], [70.5, 20.5], 1.0, false),
            ([6.2, 40.9], [73.4, 7.3], 2.45, false),
            ([3.3, 3.1], [76.9, 46.2], 1.0, false),
            ([30.5, 10.5], [31.1, 11.3], 1.3, true),
            ([50.2, 30.7], [50.8, 29.9], 1.0, true),
            ([5.5, 20.5], [70.5, 20.5], 1.0, true),
            ([10.0, 35.0], [22.0, 35.0], 3.0, true),
            ([60.7, 8.2], [12.4, 38.9], 1.75, true),
            ([40.3, 5.1], [40.3, 44.6], 2.0, true),
            ([30.5, 30.5], [31.2, 30.5], 2.0, true),
        ];
        for (a, b, h, is_arrow) in cases {
            let mut pic = Picture::new(80, 50, [255, 255, 255]);
            let mut strokes = vec![(a, b)];
            if is_arrow {
                arrow(&mut pic, a, b, h);
                if (b[0] - a[0]).hypot(b[1] - a[1]) >= 1.0 {
                    strokes.extend(head_strokes(a, b, h));
                }
            } else {
                segment(&mut pic, a, b, h);
            }
            let near = |p: [f64; 2]| strokes.iter().map(|&(s, e)| to_segment(p, s, e)).fold(f64::INFINITY, f64::min);
            let ink = inked(&pic);
            for p in &ink {
                assert!(near(*p) <= h + 1e-9, "{a:?}→{b:?}, half width {h}: {p:?} inked {} px from a stroke", near(*p));
            }
            for y in 0..50 {
                for x in 0..80 {
                    let p = [x as f64 + 0.5, y as f64 + 0.5];
                    if near(p) <= h - 1.0 / 16.0 {
                        assert_eq!(pic.get(x, y), INK, "{a:?}→{b:?}, half width {h}: {p:?} left blank");
                    }
                }
            }
        }
        // From one pixel long an arrow has a head (here two more pixels each side of the
        // shaft's end); shorter, it is its shaft alone.
        let drawn = |to: [f64; 2], head: bool| {
            let mut pic = Picture::new(20, 20, [255, 255, 255]);
            if head {
                arrow(&mut pic, [10.5, 10.25], to, 2.0);
            } else {
                segment(&mut pic, [10.5, 10.25], to, 2.0);
            }
            inked(&pic)
        };
        assert_eq!(drawn([10.5, 11.25], true).len(), drawn([10.5, 11.25], false).len() + 4);
        assert_eq!(drawn([10.5, 11.0], true), drawn([10.5, 11.0], false));
    }

    /// The arrows of a frame share one scale: the longest runs 6 boxes, the others in
    /// proportion, each from its own marker in its own direction, on both axes.
    #[test]
    fn arrows_share_the_longest_ones_scale() {
        let markers = vec![[5.0, 5.0], [14.0, 4.0]];
        let scene = scene_of(20, 12, vec![0; 240], vec![0.0; 240], markers, vec![[3.0, 4.0], [0.0, -2.5]]);
        let style = Style { px: 10, fill: Fill::Owner, arrows: true };
        let pic = render_map(&scene, &style);
        let (h, r) = (3.5, style.marker_radius());
        // Tips: (5, 5) + 1.2 × (3, 4) = (8.6, 9.8) and (14, 4) + 1.2 × (0, -2.5) = (14, 1).
        for (m, tip) in [([5.0, 5.0], [8.6, 9.8]), ([14.0, 4.0], [14.0, 1.0])] {
            let (from, to) = (to_pixel(m, 12, 10), to_pixel(tip, 12, 10));
            let (dx, dy) = (to[0] - from[0], to[1] - from[1]);
            let len = dx.hypot(dy);
            let at = |d: f64| [(from[0] + dx * d / len) as usize, (from[1] + dy * d / len) as usize];
            for d in [r + 3.0, 0.5 * len, len - 1.0] {
                let [x, y] = at(d);
                assert_eq!(pic.get(x, y), INK, "arrow from {m:?}: {d:.1} px along");
            }
            let [x, y] = at(len + h + 2.0);
            assert_eq!(pic.get(x, y), owner_colour(0), "arrow from {m:?}: past its tip");
        }
    }

    #[test]
    fn pngs_round_trip() {
        let mut pic = Picture::new(7, 3, [1, 2, 3]);
        pic.blit(&Picture::new(2, 2, [9, 9, 9]), 6, 2);
        let path = std::env::temp_dir().join(format!("pbs-visual-rt-{}.png", std::process::id()));
        pic.write_png(&path).unwrap();
        let back = Picture::read_png(&path).unwrap();
        std::fs::remove_file(&path).ok();
        assert_eq!(back, pic);
        assert_eq!(back.get(6, 2), [9, 9, 9]);
        assert!(Picture::read_png(Path::new("/nonexistent.png")).unwrap_err().contains("nonexistent"));
    }

    /// A pixel set outside the picture is dropped, not wrapped onto the next row.
    #[test]
    fn pixels_outside_the_picture_are_dropped() {
        let mut pic = Picture::new(3, 2, [0, 0, 0]);
        for (x, y) in [(3, 0), (-1, 1), (0, 2), (0, -1), (i64::MAX, 0)] {
            pic.set(x, y, [9, 9, 9]);
        }
        assert_eq!(pic, Picture::new(3, 2, [0, 0, 0]));
        pic.set(2, 1, [9, 9, 9]);
        assert_eq!(pic.get(2, 1), [9, 9, 9]);
    }

    /// PNGs other programs write: RGB without alpha, and 16 bits a channel (kept to the high
    /// byte); a grey one is refused by name.
    #[test]
    fn pngs_in_rgb_and_16_bits_are_read_as_rgba() {
        let path = std::env::temp_dir().join(format!("pbs-visual-16-{}.png", std::process::id()));
        let write = |(w, h): (u32, u32), colour: png::ColorType, depth: png::BitDepth, data: &[u8]| {
            let file = std::fs::File::create(&path).unwrap();
            let mut enc = png::Encoder::new(std::io::BufWriter::new(file), w, h);
            enc.set_color(colour);
            enc.set_depth(depth);
            enc.write_header().unwrap().write_image_data(data).unwrap();
        };
        write((1, 2), png::ColorType::Rgb, png::BitDepth::Eight, &[1, 2, 3, 4, 5, 6]);
        let pic = Picture::read_png(&path).unwrap();
        assert_eq!((pic.width, pic.height, pic.rgba), (1, 2, vec![1, 2, 3, 255, 4, 5, 6, 255]));
        write((2, 1), png::ColorType::Rgb, png::BitDepth::Sixteen, &[1, 0xff, 2, 0, 3, 7, 40, 1, 50, 2, 60, 3]);
        let pic = Picture::read_png(&path).unwrap();
        assert_eq!((pic.width, pic.height, pic.rgba), (2, 1, vec![1, 2, 3, 255, 40, 50, 60, 255]));
        write((2, 1), png::ColorType::Grayscale, png::BitDepth::Eight, &[7, 8]);
        let e = Picture::read_png(&path).unwrap_err();
        assert!(e.contains("unsupported colour type Grayscale"), "{e}");
        std::fs::remove_file(&path).ok();
    }
}
