//! Fuzzing the CSV load-map reader with proptest: arbitrary bytes, and text built from the
//! characters CSV numbers are made of. It never panics; what it accepts is a valid problem
//! (one finite, non-negative load per box of a non-empty grid, 2D or 3D). `PROPTEST_CASES` sets the
//! effort (`scripts/sanitize.sh` runs it long, in release).

use pbs::loadmap::parse_csv;
use proptest::prelude::*;

fn check(text: &str) -> Result<(), TestCaseError> {
    match parse_csv(text) {
        Ok((grid, loads)) => {
            prop_assert!(!grid.is_empty());
            prop_assert_eq!(grid.len(), loads.len());
            prop_assert!(loads.iter().all(|q| q.is_finite() && *q >= 0.0));
        }
        Err(e) => {
            let m = e.to_string();
            prop_assert!(m.starts_with("load map CSV, line ") || m.contains("grid"), "{}", m);
            prop_assert!(!m.contains("line 0"), "{}", m);
        }
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    #[test]
    fn arbitrary_bytes_never_panic(bytes in prop::collection::vec(any::<u8>(), 0..2048)) {
        check(&String::from_utf8_lossy(&bytes))?;
    }

    #[test]
    fn csv_like_text_never_panics(
        parts in prop::collection::vec(
            prop_oneof![
                Just("1"), Just("0"), Just("2.5"), Just("-1"), Just("1e308"), Just("1e309"), Just("NaN"),
                Just("inf"), Just(","), Just(",,"), Just("\n"), Just("\r\n"), Just(" "), Just("\u{feff}"),
                Just("e"), Just("."), Just("+"), Just("0x1"), Just("\0"), Just("é"),
            ],
            0..200,
        )
    ) {
        check(&parts.concat())?;
    }

    #[test]
    fn rectangles_and_boxes_of_numbers_are_read_back_exactly(
        nx in 1usize..12, ny in 1usize..12, nz in 1usize..5, seed in any::<u64>(),
    ) {
        let mut x = seed;
        let loads: Vec<f64> = (0..nx * ny * nz).map(|_| {
            x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            (x >> 11) as f64 / (1u64 << 53) as f64 * 1e6
        }).collect();
        let grid = pbs::Grid::new_3d(nx, ny, nz).unwrap();
        let (g, back) = parse_csv(&pbs::loadmap::to_csv(&grid, &loads)).unwrap();
        prop_assert_eq!((g.nx(), g.ny(), g.nz()), (nx, ny, nz));
        prop_assert_eq!(back, loads);
    }
}
