//! The searchable graph as bytes, so that a store reopens without rebuilding it.
//!
//! A snapshot holds the nodes of the graph searches walk, each with its neighbour lists and a
//! digest of its item key and vector. Slots are not stable across processes, so at load every
//! node is matched to the slot now holding the same key and vector: a node whose vector
//! changed or whose item is gone is left out (links to it are dropped), and a vector no node
//! matches is scanned exactly until the next build. A snapshot can therefore be stale or from
//! another process and still never make the index disagree with the stored vectors; a wrong
//! digest only places a vector badly in the graph, since every score is computed on the
//! stored vectors.
//!
//! Layout, little-endian: magic, dims (u32), distance (u8), m (u32), node count (u32), then per
//! node its old slot (u32), digest (u64), level (u8), and for each layer from 0 to its level a
//! neighbour count (u32) and the neighbours' old slots; then an FNV-1a checksum (u64) of all
//! that precedes it.

use std::collections::HashMap;

use super::hnsw::{Graph, MAX_LAYERS, NodeUpdate};
use crate::ItemKey;
use crate::config::Distance;

/// Identifies the format; bumped whenever the layout changes.
const MAGIC: &[u8; 8] = b"WPIXSNP1";

const FNV_OFFSET: u64 = 0xcbf2_9ce4_8422_2325;
const FNV_PRIME: u64 = 0x0000_0100_0000_01b3;

/// A digest of an item key and one of its stored vectors.
pub(super) fn digest(key: &ItemKey, vector: &[f32]) -> u64 {
    let mut h = fnv_bytes(FNV_OFFSET, key.namespace.joined().as_bytes());
    h = fnv_bytes(h ^ 0xff, key.key.as_bytes());
    for x in vector {
        h = (h ^ u64::from(x.to_bits())).wrapping_mul(FNV_PRIME);
    }
    h
}

fn fnv_bytes(mut h: u64, bytes: &[u8]) -> u64 {
    for &b in bytes {
        h = (h ^ u64::from(b)).wrapping_mul(FNV_PRIME);
    }
    h
}

/// How the index that wrote or reads a snapshot is shaped; a snapshot of another shape is
/// refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Shape {
    pub(super) dims: usize,
    pub(super) distance: Distance,
    pub(super) m: usize,
}

fn distance_tag(distance: Distance) -> u8 {
    match distance {
        Distance::Cosine => 1,
        Distance::Dot => 2,
        Distance::L2 => 3,
    }
}

/// Encodes `nodes` (each with the digest of the vector its slot holds).
pub(super) fn encode(shape: Shape, nodes: &[(NodeUpdate, u64)]) -> Vec<u8> {
    let mut out = Vec::with_capacity(32 + nodes.len() * (17 + 4 * 2 * shape.m));
    out.extend_from_slice(MAGIC);
    out.extend_from_slice(&(shape.dims as u32).to_le_bytes());
    out.push(distance_tag(shape.distance));
    out.extend_from_slice(&(shape.m as u32).to_le_bytes());
    out.extend_from_slice(&(nodes.len() as u32).to_le_bytes());
    for (node, digest) in nodes {
        out.extend_from_slice(&node.slot.to_le_bytes());
        out.extend_from_slice(&digest.to_le_bytes());
        out.push(node.level);
        for layer in &node.layers {
            out.extend_from_slice(&(layer.len() as u32).to_le_bytes());
            for n in layer {
                out.extend_from_slice(&n.to_le_bytes());
            }
        }
    }
    let sum = fnv_bytes(FNV_OFFSET, &out);
    out.extend_from_slice(&sum.to_le_bytes());
    out
}

/// Reads bytes front to back; every read is checked.
struct Reader<'a> {
    bytes: &'a [u8],
}

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8], String> {
        if self.bytes.len() < n {
            return Err("truncated".into());
        }
        let (head, rest) = self.bytes.split_at(n);
        self.bytes = rest;
        Ok(head)
    }

    fn u8(&mut self) -> Result<u8, String> {
        Ok(self.take(1)?[0])
    }

    fn u32(&mut self) -> Result<u32, String> {
        let b = self.take(4)?;
        Ok(u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
    }

    fn u64(&mut self) -> Result<u64, String> {
        let b = self.take(8)?;
        let mut a = [0u8; 8];
        a.copy_from_slice(b);
        Ok(u64::from_le_bytes(a))
    }
}

/// The nodes of a snapshot written by an index of `shape`, each with its digest; an error
/// says why the bytes cannot be used.
pub(super) fn decode(bytes: &[u8], shape: Shape) -> Result<Vec<(NodeUpdate, u64)>, String> {
    let Some(body_len) = bytes.len().checked_sub(8) else {
        return Err("truncated".into());
    };
    let (body, sum) = bytes.split_at(body_len);
    let mut expected = [0u8; 8];
    expected.copy_from_slice(sum);
    if fnv_bytes(FNV_OFFSET, body) != u64::from_le_bytes(expected) {
        return Err("checksum mismatch".into());
    }
    let mut r = Reader { bytes: body };
    if r.take(MAGIC.len())? != MAGIC {
        return Err("not an index snapshot of this version".into());
    }
    let found = (r.u32()? as usize, r.u8()?, r.u32()? as usize);
    if found != (shape.dims, distance_tag(shape.distance), shape.m) {
        return Err(format!(
            "written for another index (dims, distance, m = {found:?}, here {:?})",
            (shape.dims, distance_tag(shape.distance), shape.m)
        ));
    }
    let count = r.u32()? as usize;
    // Each node takes at least 17 bytes: no allocation beyond what the bytes can hold.
    let mut nodes = Vec::with_capacity(count.min(r.bytes.len() / 17));
    for _ in 0..count {
        let slot = r.u32()?;
        let digest = r.u64()?;
        let level = r.u8()?;
        if usize::from(level) >= MAX_LAYERS {
            return Err(format!("node {slot} has level {level}"));
        }
        let mut layers = Vec::with_capacity(usize::from(level) + 1);
        for _ in 0..=level {
            let len = r.u32()? as usize;
            let raw = r.take(len.checked_mul(4).ok_or("list too long")?)?;
            layers.push(
                raw.chunks_exact(4)
                    .map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]]))
                    .collect(),
            );
        }
        nodes.push((
            NodeUpdate {
                slot,
                level,
                layers,
            },
            digest,
        ));
    }
    if !r.bytes.is_empty() {
        return Err("trailing bytes".into());
    }
    Ok(nodes)
}

/// The graph of a snapshot's nodes on today's slots: `slot_of` gives the slot now holding a
/// digest's key and vector. Unmatched nodes and links to them are left out.
pub(super) fn rebuild_graph(
    nodes: Vec<(NodeUpdate, u64)>,
    m: usize,
    mut slot_of: HashMap<u64, u32>,
) -> Graph {
    // Old slot -> new slot, each new slot taken by one node at most.
    let mut moved: HashMap<u32, u32> = HashMap::with_capacity(nodes.len());
    for (node, digest) in &nodes {
        if let Some(slot) = slot_of.remove(digest) {
            moved.insert(node.slot, slot);
        }
    }
    let updates: Vec<NodeUpdate> = nodes
        .into_iter()
        .filter_map(|(node, _)| {
            let slot = *moved.get(&node.slot)?;
            let layers = node
                .layers
                .into_iter()
                .map(|l| l.iter().filter_map(|n| moved.get(n).copied()).collect())
                .collect();
            Some(NodeUpdate {
                slot,
                level: node.level,
                layers,
            })
        })
        .collect();
    let mut graph = Graph::new(m);
    graph.apply(updates, |_| true);
    graph
}
