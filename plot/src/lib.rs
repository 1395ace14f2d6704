//! # pbs-plot — pictures and progress bars shared by `pbs-bench` and `pbs-visual`
//!
//! | module | what |
//! |---|---|
//! | [`colour`] | one colour per owner (thread or vCore) and a heat scale for loads |
//! | [`panels`] | PNG charts: line and scatter panels (convergence, scaling, the model's calibration) and owner maps (who owns which box) |
//! | [`progress`] | progress bars on a terminal, silent in pipes and CI |
//!
//! ```
//! use pbs_plot::panels::{line_panels_rgb, Panel, Series, Stroke, PALETTE};
//! let panel = Panel {
//!     title: "max_avg".into(),
//!     x_label: "step".into(),
//!     y_label: "max_avg".into(),
//!     log_x: false,
//!     log_y: false,
//!     series: vec![Series { label: "power-cells".into(), points: vec![(0.0, 2.0), (5.0, 1.02)], color: PALETTE[0], stroke: Stroke::Solid }],
//! };
//! let mut rgb = vec![0u8; 320 * 200 * 3];
//! line_panels_rgb(&mut rgb, 320, 200, 1, &[panel]).unwrap();
//! assert!(rgb.iter().any(|&v| v != 0), "something was drawn");
//! ```

#![deny(missing_docs)]

pub mod colour;
pub mod panels;
pub mod progress;
