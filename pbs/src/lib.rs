//! # pbs — load balancing of grid tasks that keeps each thread's boxes together
//!
//! A grid code (molecular dynamics with cell lists, stencils, finite elements) is cut into a
//! regular grid of boxes, one task per box and iteration. `pbs` maps boxes to threads through
//! *virtual cores* (vCores): points in the domain, each owning the boxes of its cell. The
//! balancer moves the cells so that every cell carries the same load, while each cell stays a
//! compact block of boxes, which is what keeps a thread's data in its cache and on its NUMA
//! node.
//!
//! The default method, `power-cells` ([`methods::PowerCells`]), gives each vCore a weight and
//! a *power* cell, balances by adjusting the weights (a damped Newton ascent on a concave dual)
//! and keeps cells compact by moving each vCore towards its cell's centroid. The pair-potential
//! force laws of Papin et al. (Euro-Par 2014), which move vCores as charged particles, are the
//! `paper-*` methods beside it ([`methods::PairPotential`]).
//!
//! This crate is the balancer alone: pure, deterministic, single-threaded unless given
//! workers. Plain data goes in (a slice of `f64` loads, one per box) and plain data comes out
//! (a slice of owner ids). The runtime that measures loads and runs the boxes is
//! `pbs-scheduler`.
//!
//! ```
//! use pbs::{balance, methods, rebalance, Grid, Problem, StopRule, VCores};
//!
//! let grid = Grid::new(80, 40)?;
//! // Measured box times from your code; here a hot spot on a light background.
//! let loads: Vec<f64> = (0..grid.len())
//!     .map(|k| { let c = grid.centre(k); 1.0 + 50.0 * (-((c[0] - 60.0).powi(2) + (c[1] - 10.0).powi(2)) / 30.0).exp() })
//!     .collect();
//! let problem = Problem::new(grid, &loads, 8)?;
//! let mut vcores = VCores::random(&problem, 42);
//! let mut method = methods::by_name("power-cells")?;
//! let outcome = balance(method.as_mut(), &problem, &mut vcores, StopRule::default(), |_| {});
//! assert!(outcome.converged && outcome.max_avg <= 1.05 * outcome.lower_bound);
//! let owner_of_box_0 = vcores.owners()[0];
//! # let _ = owner_of_box_0;
//!
//! // Next iteration: new loads, a rebalancing from the same vCores (warm; it would start over
//! // from a bisection were they more than `RESTART_FROM` × the lower bound out of balance).
//! let loads2: Vec<f64> = loads.iter().enumerate().map(|(k, q)| q * (1.0 + 0.1 * (k % 7) as f64)).collect();
//! let problem2 = Problem::new(grid, &loads2, 8)?;
//! let again = rebalance(method.as_mut(), &problem2, &mut vcores, StopRule::default());
//! assert!(again.converged);
//! # Ok::<(), pbs::Error>(())
//! ```
//!
//! ## Concepts and where they live
//!
//! | concept | type | module |
//! |---|---|---|
//! | the grid of boxes, box centres and neighbours | [`Grid`] | [`grid`] |
//! | loads, vCore count, lower bound (one balancing problem) | [`Problem`] | [`problem`] |
//! | vCores: positions, weights, the owner of every box, charges | [`VCores`] | [`vcores`] |
//! | a k-way recursive coordinate bisection, the compact cold start | [`bisection::kway_rcb`], [`VCores::from_bisection`] | [`bisection`] |
//! | mending a partition across its own borders (diffusion) | [`diffusion::diffuse`] | [`diffusion`] |
//! | refining a partition box by box, to within 0.5 % of the bound | [`refine::refine`] | [`refine`] |
//! | which vCore owns a box (power distance, fast assignment) | [`assign::Assignment`] | [`assign`] |
//! | a method: one step of moving the vCores | [`Balancer`] | [`methods`] (one file each) |
//! | when to stop, the driver (a first balancing, a rebalancing), what a run reports | [`StopRule`], [`balance`], [`rebalance`], [`Outcome`] | [`balancer`] |
//! | the force laws of the paper | [`forces::ForceLaw`] | [`forces`] |
//! | `max_avg`, DOL, edge cut, migrations | functions | [`metrics`] |
//! | load maps: the paper's static cases, Perlin noise, CSV | functions, [`loadmap::PerlinMap`] | [`loadmap`] |
//!
//! The normative definitions (owner, charge, forces, `max_avg`, edge cut) are in
//! `docs/design.md` of the repository.

#![deny(missing_docs)]
#![forbid(unsafe_code)]

pub mod assign;
pub mod balancer;
pub mod bisection;
pub mod diffusion;
pub mod error;
pub mod forces;
pub mod greedy;
pub mod grid;
pub mod laplacian;
pub mod loadmap;
pub mod methods;
pub mod metrics;
pub mod pack_steal;
pub mod problem;
pub mod refine;
pub mod rng;
pub mod tiling;
pub mod vcores;

pub use balancer::{balance, is_converged, rebalance, Balancer, Outcome, Run, StepRecord, StopRule, RESTART_FROM};
pub use error::{check_memory, Error, Result, BALANCER_BYTES_PER_BOX};
pub use grid::{Grid, Point};
pub use problem::Problem;
pub use vcores::VCores;
