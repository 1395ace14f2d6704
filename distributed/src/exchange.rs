//! Boxes between ranks after every iteration: each rank sends every box it just computed to
//! the ranks that own it or read it next (its halo); the same message carries a box to a new
//! owner (a migration) and to its neighbours. One `MPI_Alltoall` of sizes, one
//! `MPI_Alltoallv` of bytes. A reader gets the part of the box its tasks read
//! ([`pbs_apps::distributed::part_for`]): of a stencil tile, the edges next to its boxes; of
//! an md box two away from its boxes, the leave list.
//!
//! A message to one rank is a run of records `box id (u64) · part code (u64) · length (u64) ·
//! the part's bytes` ([`Distributed::pack_part`]).

use mpi::datatype::{Partition, PartitionMut};
use mpi::traits::*;
use mpi::Count;
use pbs::Grid;
use pbs_apps::distributed::{part_for_reader, readers, within, Distributed, Reader, WHOLE};

/// What one rank sends in one exchange.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct Outgoing {
    /// The bytes for each rank (none for itself).
    pub to: Vec<Vec<u8>>,
    /// Boxes sent to their new owner.
    pub migrated_boxes: usize,
    /// Bytes of those boxes.
    pub migrated_bytes: usize,
    /// Bytes of the parts of boxes sent to ranks that only read them.
    pub halo_bytes: usize,
}

/// Who gets which part of which box of one rank: a function of the owners alone, so that a
/// rank lists it when they change and keeps it while they stay (listing it passes over the
/// whole grid).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Plan {
    /// By box: the box, the rank it goes to, the part, and whether that rank is its new owner.
    sends: Vec<(usize, u32, u64, bool)>,
}

impl Plan {
    /// The sends of the boxes `me` owned (`old`) to the ranks that need them under `new`.
    pub fn new(app: &dyn Distributed, grid: &Grid, old: &[u32], new: &[u32], me: u32) -> Plan {
        let mut sends = Vec::new();
        let near = within(grid, app.halo(), |k| new[k] != me);
        for k in (0..grid.len()).filter(|&k| old[k] == me && near[k]) {
            // Whoever needs box k owns a box within the halo.
            for r in readers(grid, new, k, app.halo()).into_iter().filter(|&r| r != me) {
                if let Some(part) = part_for_reader(app, new, k, r) {
                    sends.push((k, r, part, r == new[k]));
                }
            }
        }
        Plan { sends }
    }
}

/// Packs the boxes of `plan` for the `ranks` ranks. An error is the app's refusal of a part it
/// named itself (a bug in the app).
pub fn pack(app: &dyn Distributed, plan: &Plan, ranks: usize) -> Result<Outgoing, String> {
    let mut out = Outgoing { to: vec![Vec::new(); ranks], ..Outgoing::default() };
    let (mut whole, mut part_bytes) = (Vec::new(), Vec::new());
    // The box whose whole bytes `whole` holds: packed once, for all who take it whole.
    let mut packed = None;
    for &(k, r, part, migrates) in &plan.sends {
        let bytes = if part == WHOLE {
            if packed != Some(k) {
                whole.clear();
                app.pack_box(k, &mut whole);
                packed = Some(k);
            }
            &whole
        } else {
            part_bytes.clear();
            app.pack_part(k, part, &mut part_bytes)?;
            &part_bytes
        };
        record(&mut out.to[r as usize], k, part, bytes);
        if migrates {
            out.migrated_boxes += 1;
            out.migrated_bytes += bytes.len();
        } else {
            out.halo_bytes += bytes.len();
        }
    }
    Ok(out)
}

fn record(buf: &mut Vec<u8>, k: usize, part: u64, bytes: &[u8]) {
    buf.extend_from_slice(&(k as u64).to_le_bytes());
    buf.extend_from_slice(&part.to_le_bytes());
    buf.extend_from_slice(&(bytes.len() as u64).to_le_bytes());
    buf.extend_from_slice(bytes);
}

/// Appends the whole box `k` of `app` to `buf` as a record (`scratch` holds its bytes meanwhile).
pub fn push_record(buf: &mut Vec<u8>, app: &dyn Distributed, k: usize, scratch: &mut Vec<u8>) {
    scratch.clear();
    app.pack_box(k, scratch);
    record(buf, k, WHOLE, scratch);
}

/// Unpacks received records into `app`; returns the records unpacked. An error names the
/// record that is wrong.
pub fn unpack(app: &mut dyn Distributed, boxes: usize, received: &[u8]) -> Result<usize, String> {
    let mut r = Reader::new(received);
    let mut count = 0;
    while !r.is_empty() {
        let k = r.u64()? as usize;
        let part = r.u64()?;
        let len = r.len(1)?;
        if k >= boxes {
            return Err(format!("received box {k} of a {boxes}-box grid"));
        }
        app.unpack_part(k, part, r.bytes(len)?).map_err(|e| format!("box {k}: {e}"))?;
        count += 1;
    }
    Ok(count)
}

/// Displacements of consecutive blocks of `counts`, as MPI counts them (an `int`).
fn displacements(counts: &[usize]) -> Result<(Vec<Count>, Vec<Count>), String> {
    let total: usize = counts.iter().sum();
    if Count::try_from(total).is_err() {
        return Err(format!("{total} bytes in one exchange: more than MPI's int counts ({})", Count::MAX));
    }
    let mut displs = Vec::with_capacity(counts.len());
    let mut at = 0;
    for &c in counts {
        displs.push(at as Count);
        at += c;
    }
    Ok((counts.iter().map(|&c| c as Count).collect(), displs))
}

/// Sends `out.to[r]` to every rank `r` and returns what all ranks sent to this one, in rank
/// order.
pub fn all_to_all(world: &impl Communicator, out: &Outgoing) -> Result<Vec<u8>, String> {
    let sizes: Vec<usize> = out.to.iter().map(Vec::len).collect();
    let (send_counts, send_displs) = displacements(&sizes)?;
    let mut recv_counts = vec![0 as Count; out.to.len()];
    world.all_to_all_into(&send_counts[..], &mut recv_counts[..]);
    let received: Vec<usize> = recv_counts.iter().map(|&c| c as usize).collect();
    let (recv_counts, recv_displs) = displacements(&received)?;
    // One byte more than the messages: an empty Vec<u8>'s pointer is 0x1, Open MPI's
    // MPI_IN_PLACE, which MPI_Alltoallv refuses.
    let mut send: Vec<u8> = out.to.concat();
    send.push(0);
    let total = received.iter().sum();
    let mut recv = vec![0u8; total + 1];
    {
        let sendbuf = Partition::new(&send[..], send_counts, send_displs);
        let mut recvbuf = PartitionMut::new(&mut recv[..], recv_counts, recv_displs);
        world.all_to_all_varcount_into(&sendbuf, &mut recvbuf);
    }
    recv.truncate(total);
    Ok(recv)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The sliding windows agree with listing every box's readers, on random owners.
    #[test]
    fn boxes_near_others_are_those_with_a_reader() {
        let mut rng = pbs::rng::SplitMix64::new(3);
        for (nx, ny) in [(1, 1), (7, 1), (1, 9), (6, 5), (13, 11)] {
            let grid = Grid::new(nx, ny).unwrap();
            for _ in 0..20 {
                let owners: Vec<u32> = (0..grid.len()).map(|_| u32::from(rng.next_f64() < 0.1)).collect();
                for halo in [0, 1, 2, 3] {
                    let near = within(&grid, halo, |k| owners[k] != 0);
                    for (k, &near) in near.iter().enumerate() {
                        let readers = readers(&grid, &owners, k, halo);
                        assert_eq!(near, readers.iter().any(|&r| r != 0), "{nx}x{ny} halo {halo} box {k}");
                    }
                }
            }
        }
    }

    #[test]
    fn boxes_reach_their_new_owner_and_their_readers_and_bad_records_are_named() {
        let grid = Grid::new(6, 1).unwrap();
        let app = pbs_apps::distributed::build("stencil", "drift", 6, 1, 1).unwrap();
        let old = [0, 0, 0, 1, 1, 1];
        let new = [0, 0, 1, 1, 1, 2];
        let out = pack(app.as_ref(), &Plan::new(app.as_ref(), &grid, &old, &new, 0), 3).unwrap();
        // Box 2 moves to rank 1, whole; rank 1 reads box 1's face towards box 2 (the stencil
        // reads faces); rank 2 reads nothing of 0's.
        assert_eq!(out.migrated_boxes, 1);
        assert!(out.to[0].is_empty() && out.to[2].is_empty());
        let mut other = pbs_apps::distributed::build("stencil", "drift", 6, 1, 1).unwrap();
        assert_eq!(unpack(other.as_mut(), 6, &out.to[1]).unwrap(), 2);
        assert_eq!(out.migrated_bytes, app.packed_len(2), "the whole tile");
        assert_eq!(out.halo_bytes * 16 + 8, out.migrated_bytes, "one edge of a 16 × 16 tile");
        let mut bad = out.to[1].clone();
        bad[0] = 9;
        assert!(unpack(other.as_mut(), 6, &bad).unwrap_err().contains("box 9"));
        let mut bad = out.to[1].clone();
        bad[8] = 64;
        assert!(unpack(other.as_mut(), 6, &bad).unwrap_err().contains("name no face"));
        assert!(unpack(other.as_mut(), 6, &out.to[1][..20]).is_err());
        assert!(displacements(&[usize::MAX / 2, 3]).unwrap_err().contains("MPI's int"));
    }
}
