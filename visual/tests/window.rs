//! The real window under Xvfb (software OpenGL): opened, played while the balancer drifts with
//! the Perlin map, screenshotted through eframe, and the screenshot checked. `scripts/test.sh`
//! installs xvfb and Mesa and runs it (`--ignored`); plain `cargo test` skips it with that reason.

use std::path::PathBuf;
use std::process::Command;

use pbs_visual::raster::{owner_colour, Picture};

#[test]
#[ignore = "needs xvfb-run and Mesa: scripts/test.sh installs them and runs it"]
fn the_window_opens_plays_and_shows_every_vcore() {
    let xvfb = Command::new("sh").args(["-c", "command -v xvfb-run"]).output().unwrap();
    assert!(
        xvfb.status.success(),
        "xvfb-run is missing: install xvfb and a software OpenGL (apt-get install xvfb libgl1-mesa-dri \
         libxkbcommon-x11-0), as scripts/test.sh does"
    );
    let dir = std::env::temp_dir().join(format!("pbs-visual-window-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let (png, stats) = (dir.join("window.png"), dir.join("frames.json"));
    // A window that never takes its screenshot would never close: two minutes, then a failure.
    let out = Command::new("timeout")
        .args(["120", "xvfb-run", "-a", "-s", "-screen 0 1280x1024x24"])
        .arg(env!("CARGO_BIN_EXE_pbs-visual"))
        .args(["--play", "--drift", "--frames", "60", "--screenshot"])
        .arg(&png)
        .arg("--frame-stats")
        .arg(&stats)
        .env("LIBGL_ALWAYS_SOFTWARE", "1")
        .output()
        .unwrap();
    let log = format!("{}\n{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    let timed_out = out.status.code() == Some(124);
    assert!(
        out.status.success(),
        "the window run {}:\n{log}",
        if timed_out { "did not end in 120 s" } else { "failed" }
    );

    let stats: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&stats).unwrap()).unwrap();
    assert!(stats["frames"].as_u64().unwrap() >= 60, "{stats}");
    assert!(stats["sim_steps"].as_u64().unwrap() > 0, "the balancer did not run while the window drew: {stats}");
    assert!(stats["frame_ms_median"].as_f64().unwrap() > 0.0);

    let pic = Picture::read_png(&png).unwrap();
    assert_eq!([pic.width as u64, pic.height as u64], [1024, 768], "default window size, scale 1 under Xvfb");
    assert_eq!(stats["screenshot"], serde_json::json!([1024, 768]));
    // Every vCore's marker colour is on screen (the map texture is sampled nearest, so marker
    // colours survive; allow ±2 per channel for the sRGB round trip of the GL pipeline).
    let near = |a: [u8; 3], b: [u8; 3]| a.iter().zip(&b).all(|(x, y)| x.abs_diff(*y) <= 2);
    let mut on_screen: Vec<[u8; 3]> = Vec::new();
    for y in 0..pic.height {
        for x in 0..pic.width {
            let c = pic.get(x, y);
            if on_screen.last() != Some(&c) {
                on_screen.push(c);
            }
        }
    }
    on_screen.sort_unstable();
    on_screen.dedup();
    let missing: Vec<u32> = (0..72).filter(|&i| !on_screen.iter().any(|c| near(*c, owner_colour(i)))).collect();
    assert!(missing.is_empty(), "vCores {missing:?} not visible in the screenshot");
    // The window is not one flat colour: controls, map and charts are there.
    assert!(on_screen.len() > 500, "only {} colours on screen", on_screen.len());
    keep_for_inspection(&png);
    std::fs::remove_dir_all(&dir).ok();
}

/// Copies the screenshot to `target/pbs-visual-window.png` so a person can look at it.
fn keep_for_inspection(png: &PathBuf) {
    let target = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../target/pbs-visual-window.png");
    let _ = std::fs::copy(png, target);
}
