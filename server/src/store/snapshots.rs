//! What the store keeps of a session's snapshot (`spec/http-api.md`, "Snapshots in the store"):
//! a whole snapshot (the base) and the deltas of the turns since, each written once. Agents'
//! session files only grow (a JSONL line per event), so a delta is the new tail of each file, and
//! keeping a session resumable costs about its files' bytes once, not once per turn.
//!
//! [`Chain::next`] chooses what a new snapshot is written as: nothing (it changed nothing), a
//! delta on what the store holds, or a new base (a compaction) once the kept base and deltas would
//! outweigh twice what the session's snapshot takes whole, or the deltas' count reaches
//! [`MAX_DELTAS`]. A session whose files grow is so written about once (deltas only, plus their
//! small envelopes), while one whose agent rewrites a file each turn (every delta whole) compacts
//! every other turn: the store never keeps more than about twice a whole snapshot. [`StoredChain::restore`] puts a kept chain back together, refusing one
//! with a missing or damaged link ([`SnapshotError::Corrupt`]): the session then goes on by its
//! files in the home or a flagged replay, never from a half snapshot.

use agent_api::snapshot::{SnapshotDelta, SnapshotError};
use agent_api::SessionSnapshot;

/// The most deltas a base carries before the next snapshot is written whole (a restore reads
/// and applies each).
pub const MAX_DELTAS: u64 = 256;

/// A whole snapshot, as written: the bytes of `SessionSnapshot::to_bytes`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredSnapshot {
    /// The turn after which it was taken.
    pub turn: u64,
    /// Its bytes.
    pub bytes: Vec<u8>,
}

/// One delta on the kept base, as written: the bytes of `SnapshotDelta::to_bytes`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredDelta {
    /// Its place after the base, from 1, with no gap.
    pub seq: u64,
    /// The turn after which its snapshot was taken.
    pub turn: u64,
    /// Its bytes.
    pub bytes: Vec<u8>,
}

/// A session's snapshot as the store keeps it: a base and the deltas written on it since.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredChain {
    /// The turn after which the newest of them was taken.
    pub turn: u64,
    /// The base's bytes.
    pub base: Vec<u8>,
    /// How many deltas the store recorded on the base (a restore checks it has them all).
    pub delta_count: u64,
    /// The deltas, in order.
    pub deltas: Vec<StoredDelta>,
}

impl StoredChain {
    /// A chain of a base alone, as a whole snapshot's write leaves it.
    pub fn whole(snapshot: StoredSnapshot) -> Self {
        Self {
            turn: snapshot.turn,
            base: snapshot.bytes,
            delta_count: 0,
            deltas: Vec::new(),
        }
    }

    /// The chain a store reads as rows of `(seq, turn, bytes, deltas)` in `seq` order: the base
    /// first (`seq` 0, with the count of deltas it recorded), then its deltas. `None` without a
    /// base.
    pub(crate) fn from_rows(
        rows: impl IntoIterator<Item = (u64, u64, Vec<u8>, u64)>,
    ) -> Option<Self> {
        let mut rows = rows.into_iter();
        let (seq, turn, bytes, delta_count) = rows.next()?;
        if seq != 0 {
            return None;
        }
        let mut chain = Self::whole(StoredSnapshot { turn, bytes });
        chain.delta_count = delta_count;
        chain.deltas = rows
            .map(|(seq, turn, bytes, _)| StoredDelta { seq, turn, bytes })
            .collect();
        Some(chain)
    }

    /// The chain with `delta` written on it.
    pub fn push(&mut self, delta: StoredDelta) {
        self.turn = delta.turn;
        self.delta_count = delta.seq;
        self.deltas.push(delta);
    }

    /// The bytes it takes in the store.
    pub fn bytes(&self) -> u64 {
        self.base.len() as u64
            + self
                .deltas
                .iter()
                .map(|d| d.bytes.len() as u64)
                .sum::<u64>()
    }

    /// The snapshot the chain amounts to: its base with every delta applied in order, checked as
    /// `SessionSnapshot::from_bytes` checks one. A delta missing (the count the store recorded,
    /// or a gap), cut short or damaged, or one that does not fit what it follows is
    /// [`SnapshotError::Corrupt`] saying which.
    pub fn restore(&self) -> Result<SessionSnapshot, SnapshotError> {
        Chain::read(self).map(|chain| chain.snapshot)
    }
}

/// What to write for a new snapshot ([`Chain::next`]).
#[derive(Debug)]
pub(crate) enum SnapshotWrite {
    /// Nothing: it holds what the store holds.
    Nothing,
    /// A new base, replacing the kept one and its deltas.
    Whole(StoredSnapshot),
    /// A delta on the kept base.
    Delta(StoredDelta),
}

impl SnapshotWrite {
    /// The bytes it writes, and `whole` or `delta` (the metrics' label).
    pub(crate) fn weight(&self) -> Option<(&'static str, u64)> {
        match self {
            SnapshotWrite::Nothing => None,
            SnapshotWrite::Whole(s) => Some(("whole", s.bytes.len() as u64)),
            SnapshotWrite::Delta(d) => Some(("delta", d.bytes.len() as u64)),
        }
    }
}

/// What a server knows the store holds of one session's snapshot: the snapshot the chain amounts
/// to and what its parts weigh (held while the server runs the session, so that the next delta is
/// taken against it without reading the store).
#[derive(Debug, Clone)]
pub(crate) struct Chain {
    pub(crate) snapshot: SessionSnapshot,
    turn: u64,
    base_bytes: u64,
    delta_bytes: u64,
    deltas: u64,
}

impl Chain {
    /// What to write for `snapshot`, taken after `turn`, on `held` (what the store holds, `None`
    /// when unknown), and what the store holds once it is written.
    pub(crate) fn next(
        held: Option<Chain>,
        snapshot: SessionSnapshot,
        turn: u64,
    ) -> Result<(SnapshotWrite, Chain), SnapshotError> {
        let held = held.filter(|h| {
            h.snapshot.agent == snapshot.agent
                && h.snapshot.native_session_id == snapshot.native_session_id
        });
        if let Some(held) = held {
            if held.turn == turn && same_state(&held.snapshot, &snapshot) {
                return Ok((SnapshotWrite::Nothing, held));
            }
            let bytes = snapshot.delta_from(&held.snapshot).to_bytes()?;
            let delta_bytes = held.delta_bytes + bytes.len() as u64;
            if held.deltas < MAX_DELTAS
                && held.base_bytes + delta_bytes <= 2 * whole_bytes(&snapshot)
            {
                let seq = held.deltas + 1;
                let chain = Chain {
                    snapshot,
                    turn,
                    base_bytes: held.base_bytes,
                    delta_bytes,
                    deltas: seq,
                };
                return Ok((
                    SnapshotWrite::Delta(StoredDelta { seq, turn, bytes }),
                    chain,
                ));
            }
        }
        let bytes = snapshot.to_bytes()?;
        let chain = Chain {
            snapshot,
            turn,
            base_bytes: bytes.len() as u64,
            delta_bytes: 0,
            deltas: 0,
        };
        Ok((SnapshotWrite::Whole(StoredSnapshot { turn, bytes }), chain))
    }

    /// What `stored` amounts to ([`StoredChain::restore`]).
    pub(crate) fn read(stored: &StoredChain) -> Result<Chain, SnapshotError> {
        let count = stored.delta_count;
        let link = |seq: u64, reason: String| SnapshotError::Corrupt {
            reason: format!("its delta {seq} of {count}: {reason}"),
        };
        let mut snapshot = SessionSnapshot::from_bytes(&stored.base)?;
        let mut delta_bytes = 0;
        for expected in 1..=count.max(stored.deltas.len() as u64) {
            let Some(stored) = stored.deltas.get(expected as usize - 1) else {
                return Err(link(expected, "missing".into()));
            };
            if stored.seq != expected || expected > count {
                return Err(link(expected, format!("delta {} in its place", stored.seq)));
            }
            let delta = SnapshotDelta::from_bytes(&stored.bytes).map_err(|e| match e {
                SnapshotError::Corrupt { reason } => link(expected, reason),
                other => other,
            })?;
            snapshot = snapshot.applied(&delta).map_err(|e| match e {
                SnapshotError::Corrupt { reason } => link(expected, reason),
                other => other,
            })?;
            delta_bytes += stored.bytes.len() as u64;
        }
        Ok(Chain {
            snapshot,
            turn: stored.turn,
            base_bytes: stored.base.len() as u64,
            delta_bytes,
            deltas: count,
        })
    }

    /// The turn the store's snapshot was taken after.
    pub(crate) fn turn(&self) -> u64 {
        self.turn
    }
}

/// Whether two snapshots of one session hold the same state (when each was taken aside).
fn same_state(a: &SessionSnapshot, b: &SessionSnapshot) -> bool {
    a.files == b.files && a.continuity == b.continuity && a.working_dir == b.working_dir
}

/// About what `snapshot` takes written whole (its files' bytes in base64, their names, its
/// envelope), without writing it.
fn whole_bytes(snapshot: &SessionSnapshot) -> u64 {
    const ENVELOPE: u64 = 256;
    const PER_FILE: u64 = 96;
    ENVELOPE
        + snapshot
            .files
            .iter()
            .map(|f| {
                (f.bytes.len() as u64).div_ceil(3) * 4
                    + (f.root.len() + f.path.len()) as u64
                    + PER_FILE
            })
            .sum::<u64>()
}

#[cfg(test)]
mod tests {
    use super::*;
    use agent_api::snapshot::SnapshotFile;
    use agent_api::AgentKind;

    fn session(lines: usize) -> SessionSnapshot {
        let mut s = SessionSnapshot::new(AgentKind::new("my_agent").unwrap(), "s-1");
        let text: String = (1..=lines)
            .map(|n| format!("{{\"turn\":{n},\"prompt\":\"{}\"}}\n", "x".repeat(500)))
            .collect();
        s.files.push(SnapshotFile::new(
            "HOME",
            "sessions/s-1.jsonl",
            text.into_bytes(),
        ));
        s
    }

    /// Writes `turns` snapshots of a growing session into a chain as a store would; the chain
    /// and the bytes written.
    fn written(turns: usize, file: impl Fn(usize) -> SessionSnapshot) -> (StoredChain, u64) {
        let mut held = None;
        let mut stored: Option<StoredChain> = None;
        let mut total = 0;
        for turn in 1..=turns {
            let (write, chain) = Chain::next(held.take(), file(turn), turn as u64).unwrap();
            total += write.weight().map_or(0, |(_, bytes)| bytes);
            match write {
                SnapshotWrite::Nothing => {}
                SnapshotWrite::Whole(whole) => stored = Some(StoredChain::whole(whole)),
                SnapshotWrite::Delta(delta) => stored.as_mut().unwrap().push(delta),
            }
            held = Some(chain);
        }
        (stored.unwrap(), total)
    }

    #[test]
    fn a_growing_session_is_written_about_once_and_restores_exactly() {
        let (chain, total) = written(50, session);
        let native = session(50).file_bytes();
        // Rewritten whole each turn it would be ~25 times the final files (and a third more
        // for base64); written as deltas, about the files' bytes once.
        assert!(total < 2 * native, "{total} bytes written for {native}");
        assert!(!chain.deltas.is_empty());
        let mut restored = chain.restore().unwrap();
        restored.taken_at_ms = 0;
        let mut expected = session(50);
        expected.taken_at_ms = 0;
        assert_eq!(restored, expected);
    }

    #[test]
    fn a_file_rewritten_each_turn_compacts_and_the_chain_stays_small() {
        // Each turn a different file of the same size: every delta is whole.
        let rewritten = |turn: usize| {
            let mut s = SessionSnapshot::new(AgentKind::new("my_agent").unwrap(), "s-1");
            s.files.push(SnapshotFile::new(
                "HOME",
                "chat.json",
                vec![b'a' + (turn % 26) as u8; 4096],
            ));
            s
        };
        let (chain, _) = written(20, rewritten);
        assert!(
            chain.bytes() <= 2 * whole_bytes(&rewritten(20)),
            "{} bytes kept",
            chain.bytes()
        );
        assert_eq!(chain.restore().unwrap().files, rewritten(20).files);
    }

    #[test]
    fn an_unchanged_snapshot_writes_nothing_and_a_new_turn_writes_a_small_delta() {
        let (write, held) = Chain::next(None, session(3), 3).unwrap();
        assert!(matches!(write, SnapshotWrite::Whole(_)));
        let (write, held) = Chain::next(Some(held), session(3), 3).unwrap();
        assert!(matches!(write, SnapshotWrite::Nothing));
        let (write, _) = Chain::next(Some(held), session(3), 4).unwrap();
        assert!(matches!(
            write,
            SnapshotWrite::Delta(StoredDelta { seq: 1, .. })
        ));
    }

    #[test]
    fn a_chain_with_a_missing_damaged_or_misplaced_delta_is_a_typed_error() {
        let (chain, _) = written(4, session);
        assert_eq!(chain.delta_count, 3);
        let corrupt = |chain: &StoredChain| match chain.restore() {
            Err(SnapshotError::Corrupt { reason }) => reason,
            other => panic!("{other:?}"),
        };
        // The last delta gone (the count the store recorded says so), or one in the middle.
        let mut last_gone = chain.clone();
        last_gone.deltas.pop();
        assert!(corrupt(&last_gone).contains("delta 3 of 3: missing"));
        let mut middle_gone = chain.clone();
        middle_gone.deltas.remove(1);
        assert!(corrupt(&middle_gone).contains("delta 2 of 3"));
        // Cut short.
        let mut cut = chain.clone();
        cut.deltas[0].bytes.truncate(20);
        assert!(corrupt(&cut).contains("delta 1 of 3: cut short"));
        // Applied out of order: the append does not follow what it expects.
        let mut swapped = chain.clone();
        swapped.deltas.swap(0, 1);
        swapped.deltas[0].seq = 1;
        swapped.deltas[1].seq = 2;
        assert!(corrupt(&swapped).contains("delta 1 of 3"));
        // A base that is no snapshot.
        let mut base = chain;
        base.base.truncate(10);
        assert!(matches!(base.restore(), Err(SnapshotError::Corrupt { .. })));
    }
}
