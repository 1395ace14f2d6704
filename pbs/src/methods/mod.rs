//! Every balancing method, one file each, all behind [`crate::Balancer`], selectable by name so
//! that every comparison can show the paper's methods beside ours.
//!
//! | name | what it is |
//! |---|---|
//! | `power-cells` (default) | [`PowerCells`]: power cells whose weights solve the concave dual of the balance problem, vCores relaxed towards their cells' centroids |
//! | `power-cells-pair` | [`PowerCells`] with [`Motion::PairSprings`]: the same weights, vCores moved by springs between neighbouring cells instead of towards their centroids |
//! | `paper-eq7` | [`PairPotential`] with eq. 7 (the paper's final force) on plain Voronoi cells |
//! | `paper-eq7-attract` | eq. 7 plus the §5.2 task attraction |
//! | `paper-eq6` | eq. 6 (no short-range repulsion: dipoles form) |
//! | `paper-eq4` | eq. 4 (repulsive only) |
//! | `paper-eq1` | eq. 1 (Coulomb) |

mod pair_potential;
mod power;

pub use pair_potential::PairPotential;
pub use power::{Motion, PowerCells, PowerCellsSettings};

use crate::balancer::Balancer;
use crate::error::{Error, Result};
use crate::forces::ForceLaw;

/// Every method name, default first.
pub const NAMES: &[&str] =
    &["power-cells", "power-cells-pair", "paper-eq7", "paper-eq7-attract", "paper-eq6", "paper-eq4", "paper-eq1"];

/// The default method's name.
pub const DEFAULT: &str = "power-cells";

/// A method by name, with its default parameters.
pub fn by_name(name: &str) -> Result<Box<dyn Balancer + Send>> {
    let pair = |law, attraction| {
        Box::new(PairPotential::new(name, law, attraction).expect("the paper's attractions are valid"))
    };
    Ok(match name {
        "power-cells" => Box::new(PowerCells::default()),
        "power-cells-pair" => Box::new(
            PowerCells::new(PowerCellsSettings { motion: Motion::PairSprings, ..Default::default() })
                .expect("default settings are valid"),
        ),
        "paper-eq7" => pair(ForceLaw::BalanceShortRange, 0.0),
        "paper-eq7-attract" => pair(ForceLaw::BalanceShortRange, 1.0),
        "paper-eq6" => pair(ForceLaw::Balance, 0.0),
        "paper-eq4" => pair(ForceLaw::InverseCharge, 0.0),
        "paper-eq1" => pair(ForceLaw::Coulomb, 0.0),
        _ => return Err(Error::UnknownMethod { name: name.to_string(), known: NAMES.join(", ") }),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_listed_name_resolves_and_unknown_names_are_refused() {
        for n in NAMES {
            assert_eq!(by_name(n).unwrap().name(), *n);
        }
        let e = by_name("metis").err().unwrap();
        assert!(e.to_string().contains("paper-eq7"), "{e}");
    }
}
