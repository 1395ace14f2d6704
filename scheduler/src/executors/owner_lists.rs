//! Each thread's boxes under an owner mapping, as the owner-computes executors (`pbs` and the
//! remappers) walk them: index lists, and the same lists as contiguous ranges (a compact part
//! owns a few runs per grid row, and walking ranges reads no index list).

use std::ops::Range;

/// Each thread's boxes in index order, and as ranges of at most `chunk` boxes.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct OwnerLists {
    /// Per thread, its boxes in index order.
    pub lists: Vec<Vec<u32>>,
    /// Per thread, its list as contiguous ranges of at most `chunk` boxes, in list order.
    pub runs: Vec<Vec<Range<usize>>>,
}

impl OwnerLists {
    /// The lists of `threads` threads for `owners` (one thread id below `threads` per box).
    pub fn new(owners: &[u32], threads: usize, chunk: usize) -> OwnerLists {
        let mut lists = vec![Vec::new(); threads];
        for (k, &o) in owners.iter().enumerate() {
            lists[o as usize].push(k as u32);
        }
        let runs = lists.iter().map(|l| runs_of(l, chunk)).collect();
        OwnerLists { lists, runs }
    }
}

/// Cuts an increasing list of boxes into contiguous ranges of at most `chunk` boxes.
fn runs_of(list: &[u32], chunk: usize) -> Vec<Range<usize>> {
    let mut runs: Vec<Range<usize>> = Vec::new();
    for &k in list {
        let k = k as usize;
        match runs.last_mut() {
            Some(r) if r.end == k && r.len() < chunk => r.end += 1,
            _ => runs.push(k..k + 1),
        }
    }
    runs
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn runs_cover_the_list_in_order_with_at_most_chunk_boxes() {
        let list = [0, 1, 2, 3, 4, 7, 8, 10, 11, 12, 13, 14, 15, 16];
        let runs = runs_of(&list, 4);
        assert_eq!(runs, vec![0..4, 4..5, 7..9, 10..14, 14..17]);
        let flat: Vec<u32> = runs.into_iter().flatten().map(|k| k as u32).collect();
        assert_eq!(flat, list);
        assert!(runs_of(&[], 4).is_empty());
        let lists = OwnerLists::new(&[1, 1, 0, 1], 3, 8);
        assert_eq!(lists.lists, vec![vec![2], vec![0, 1, 3], vec![]]);
        assert_eq!(lists.runs, vec![vec![2..3], vec![0..2, 3..4], vec![]]);
    }
}
