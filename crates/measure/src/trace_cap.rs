//! The kernel trace file's cap (`run --trace-max-size`, `compare --trace-max-size`): its size and
//! the rule that chose it, said in collector.json's trace section; and the refusal of a traced
//! run whose results filesystem has no room for a useful trace. Past the cap the capture counts
//! the records and writes none (collector/src/capture.rs), as `perf record --max-size` and
//! Perfetto's `max_file_size_bytes` bound theirs.

use std::path::Path;

use host::disk::{self, Room};
use units::bytes;

/// The default's most: a Perfetto trace derived from 4 GiB of records (about 67 M) is already
/// past what the UI opens; `report --perfetto` cuts a window of it.
pub const DEFAULT_MOST: u64 = 4 << 30;
/// Below this free on the results filesystem a traced run is refused: half of it, the default
/// cap, holds about 2 M records, a fraction of a second of a busy run.
pub const LEAST_FREE: u64 = 256 << 20;

/// The cap and its rule in words.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TraceCap {
    pub bytes: u64,
    pub rule: String,
}

/// The cap when none is given: the smaller of DEFAULT_MOST and half of what is free, so that
/// the trace leaves the other half to the run's other files and to everything else on it.
pub fn default_cap(room: &Room) -> TraceCap {
    let half = room.free_bytes / 2;
    if half < DEFAULT_MOST {
        TraceCap {
            bytes: half,
            rule: format!(
                "the default: half the {} free on {} (less than {})",
                bytes(room.free_bytes as f64),
                room.mount.display(),
                bytes(DEFAULT_MOST as f64)
            ),
        }
    } else {
        TraceCap {
            bytes: DEFAULT_MOST,
            rule: format!(
                "the default: {}, no more than half the {} free on {}",
                bytes(DEFAULT_MOST as f64),
                bytes(room.free_bytes as f64),
                room.mount.display()
            ),
        }
    }
}

/// The cap for a traced run: `given` (--trace-max-size) or the default; Err: the refusal, in one
/// line naming the free space, when the results filesystem has less than LEAST_FREE free.
pub fn choose(given: Option<u64>, room: &Room) -> Result<TraceCap, String> {
    if room.free_bytes < LEAST_FREE {
        return Err(format!(
            "the trace needs at least {} free on the results filesystem; {} has {} (free some, or give --out elsewhere)",
            bytes(LEAST_FREE as f64),
            room.mount.display(),
            bytes(room.free_bytes as f64)
        ));
    }
    Ok(match given {
        Some(b) => TraceCap {
            bytes: b,
            rule: "given by --trace-max-size".into(),
        },
        None => default_cap(room),
    })
}

/// `choose` for a results root (made or not yet).
pub fn for_results(out_root: &Path, given: Option<u64>) -> Result<TraceCap, String> {
    let room = disk::room(out_root).map_err(|err| {
        format!(
            "the free space on the results filesystem ({}): {err}",
            out_root.display()
        )
    })?;
    choose(given, &room)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::PathBuf;

    fn room(free_bytes: u64) -> Room {
        Room {
            free_bytes,
            mount: PathBuf::from("/"),
        }
    }

    #[test]
    fn the_default_is_the_smaller_of_4_gib_and_half_the_free_space() {
        let small = default_cap(&room(9 << 30));
        assert_eq!(small.bytes, 4 << 30);
        assert!(
            small.rule.starts_with("the default: 4.0 GiB"),
            "{}",
            small.rule
        );
        assert!(small.rule.contains("9.0 GiB free on /"), "{}", small.rule);
        let tight = default_cap(&room(3 << 30));
        assert_eq!(tight.bytes, 3 << 29);
        assert!(
            tight
                .rule
                .starts_with("the default: half the 3.0 GiB free on /"),
            "{}",
            tight.rule
        );
        // At exactly twice the most, either rule gives the most.
        assert_eq!(default_cap(&room(8 << 30)).bytes, 4 << 30);
    }

    #[test]
    fn too_little_room_is_refused_naming_it_and_a_given_size_is_kept() {
        let why = choose(Some(1 << 30), &room(100 << 20)).unwrap_err();
        assert!(why.contains("/ has 100 MiB"), "{why}");
        assert!(!why.contains('\n'));
        assert_eq!(
            choose(None, &room(LEAST_FREE)).unwrap().bytes,
            LEAST_FREE / 2
        );
        let given = choose(Some(2 << 30), &room(1 << 30)).unwrap();
        assert_eq!(given.bytes, 2 << 30);
        assert_eq!(given.rule, "given by --trace-max-size");
    }
}
