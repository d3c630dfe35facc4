//! Pages as a person sees them: headless Chromium (Debian's `chromium`) screenshots a page
//! offline, and the picture's pixels are counted by colour.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use super::wait_with_limit;

/// Chromium on PATH, when installed (the tests that need it print why they are skipped).
pub fn chromium() -> Option<PathBuf> {
    let paths = std::env::var_os("PATH")?;
    ["chromium", "chromium-browser", "google-chrome"]
        .iter()
        .flat_map(|name| std::env::split_paths(&paths).map(move |d| d.join(name)))
        .find(|p| p.is_file())
}

/// A screenshot's pixels, row by row.
pub struct Screenshot {
    pub width: u32,
    pub height: u32,
    pub channels: usize,
    pub pixels: Vec<u8>,
    pub png: PathBuf,
}

impl Screenshot {
    fn is(&self, x: u32, y: u32, c: [u8; 3]) -> bool {
        let at = (y as usize * self.width as usize + x as usize) * self.channels;
        (0..3).all(|i| (self.pixels[at + i] as i16 - c[i] as i16).abs() <= 2)
    }

    /// Pixels of one colour (±2 per channel) in the region whose right, lower and lower-right
    /// neighbours are of it too: filled shapes, not text (antialiased glyphs have greys of every
    /// shade, in strokes a pixel or two wide).
    pub fn solid(&self, c: [u8; 3], xs: std::ops::Range<u32>, ys: std::ops::Range<u32>) -> usize {
        let xs = xs.start..xs.end.min(self.width - 1);
        let ys = ys.start..ys.end.min(self.height - 1);
        ys.flat_map(|y| xs.clone().map(move |x| (x, y)))
            .filter(|&(x, y)| {
                self.is(x, y, c)
                    && self.is(x + 1, y, c)
                    && self.is(x, y + 1, c)
                    && self.is(x + 1, y + 1, c)
            })
            .count()
    }
}

/// Pixels of one colour (±2 per channel).
pub fn count_colour(rgba: &[u8], channels: usize, c: [u8; 3]) -> usize {
    rgba.chunks(channels)
        .filter(|p| (0..3).all(|i| (p[i] as i16 - c[i] as i16).abs() <= 2))
        .count()
}

/// `page` opened offline in headless Chromium at `size`, screenshotted to `<tmp>/<name>.png`
/// and decoded.
pub fn screenshot(
    browser: &Path,
    page: &Path,
    tmp: &Path,
    name: &str,
    (width, height): (u32, u32),
) -> Screenshot {
    let png = tmp.join(format!("{name}.png"));
    let profile = tmp.join(format!("profile-{name}"));
    let mut child = Command::new(browser)
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-dev-shm-usage",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--no-first-run",
            "--hide-scrollbars",
        ])
        .arg(format!("--window-size={width},{height}"))
        .arg(format!("--user-data-dir={}", profile.display()))
        .arg(format!("--screenshot={}", png.display()))
        .arg(format!("file://{}", page.display()))
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let status = wait_with_limit(&mut child, Duration::from_secs(120));
    assert!(status.success(), "chromium exited with {status}");
    let decoder = png::Decoder::new(std::io::BufReader::new(fs::File::open(&png).unwrap()));
    let mut reader = decoder.read_info().unwrap();
    let mut buf = vec![0; reader.output_buffer_size().unwrap()];
    let info = reader.next_frame(&mut buf).unwrap();
    let channels = info.color_type.samples();
    assert!(channels >= 3, "{:?}", info.color_type);
    buf.truncate(info.buffer_size());
    assert_eq!((info.width, info.height), (width, height));
    Screenshot {
        width: info.width,
        height: info.height,
        channels,
        pixels: buf,
        png,
    }
}
