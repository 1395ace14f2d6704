//! # pbs-visual — the live Perlin-noise simulator
//!
//! The paper's simulator gave real-time feedback on load maps, vCores and their cells; this is
//! ours. A load map (the paper's four static cases, a Perlin map that drifts or jumps, a CSV
//! file, plus load painted with the mouse) is balanced step by step by any method of the `pbs`
//! crate, and shown as a map (boxes in their owner's colour, darker where loaded, or as a heat
//! map; cell outlines; vCores as markers with their last displacement) beside the paper's
//! Fig. 5/6 charts (max_avg and the DOL extremes against steps) and the migrations per step.
//! `--app md|stencil` shows a grid app running on the `pbs` executor instead: the work of
//! every box, which thread owns it, and each thread's busy time.
//!
//! The same picture is drawn in a window (eframe/egui) or headless, into a PNG or an animated
//! GIF, which is how reports and tests use it. A 3D grid (`--grid 40x40x12`) is drawn as the
//! block of its layers, z = 0 at the top left ([`raster::MapLayout`]); the mouse adds, drags
//! and paints on the layer under it.
//!
//! ```
//! use pbs_visual::model::{Model, Settings};
//! use pbs_visual::raster::{owner_colour, render_map, MapLayout, Style};
//! use pbs_visual::runner::Simulation;
//!
//! let mut model = Model::new(Settings { nx: 60, ny: 40, nz: 1, vcores: 8, ..Settings::default() })?;
//! while model.tick()? {} // balance until converged
//! let scene = model.scene();
//! let style = Style::fit(&scene.grid, 480);
//! let picture = render_map(&scene, &style);
//! assert_eq!((picture.width, picture.height), (480, 320));
//! let [x, y] = MapLayout::new(&scene.grid, style.px).to_pixel(scene.markers[3]).unwrap();
//! assert_eq!(picture.get(x as usize, y as usize), owner_colour(3)); // vCore 3's marker
//! # Ok::<(), String>(())
//! ```
//!
//! Where things are: the state a frame shows in [`scene`], the balancer on a load map in
//! [`model`], a grid app on the executor in [`live`], the thread that runs either off the UI
//! thread in [`runner`], the drawing in [`raster`], the PNG/GIF writer in [`headless`], the
//! window in [`app`].

#![deny(missing_docs)]

pub mod app;
pub mod headless;
pub mod live;
pub mod model;
pub mod raster;
pub mod runner;
pub mod scene;
